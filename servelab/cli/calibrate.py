"""`servelab calibrate RUN…`: fit the emulator's effective bandwidth, compute and overheads for one machine x
engine x weight format from measured runs, save them as a profile that `plan` and `predict` use, and say how
well they explain the runs (servelab/predict/calibrate.py, profiles.py; docs/predict.md "Calibration").
"""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path

import typer

from servelab.cli.output import print_json, stderr_console, stdout_console
from servelab.errors import ConfigError


def register(app: typer.Typer) -> None:
    """Add `servelab calibrate` to the app."""

    @app.command(
        "calibrate",
        context_settings={"allow_extra_args": True},
        epilog="The engine's flags the server ran with go after --, in its own words (-- -ub 256).",
    )
    def calibrate_command(
        ctx: typer.Context,
        runs: list[str] = typer.Argument(..., help="Measured run ids (or unique prefixes) of one engine."),
        gpu: str | None = typer.Option(
            None, "--gpu", help="The device the runs were measured on: a catalog GPU or cpu (this machine)."
        ),
        model: str | None = typer.Option(
            None,
            "--model",
            help="Catalog id, .gguf file or config.json (default: the model the server named).",
        ),
        quant: str | None = typer.Option(None, "--quant", help="Weight format (default: the model's)."),
        parallel: int | None = typer.Option(
            None, "--parallel", help="llama.cpp -np the server ran with (default: its /slots)."
        ),
        context: int | None = typer.Option(
            None, "--context", help="The server's whole context (-c, max_model_len)."
        ),
        target: int | None = typer.Option(None, "--target", help="Only this target index of each run."),
        db: Path = typer.Option(None, "--db", help="Result store (default: the user data directory)."),
        no_save: bool = typer.Option(False, "--no-save", help="Report the fit without saving a profile."),
        json_out: bool = typer.Option(False, "--json", help="Print the fit as JSON on stdout."),
    ) -> None:
        """Fit effective bandwidth, compute and overheads to measured runs; save them for plan and predict."""
        from servelab.cli.planning import PlanningInputs
        from servelab.cli.predict import _plan
        from servelab.predict.calibrate import fit
        from servelab.predict.machine import emulated_engine
        from servelab.predict.measured import measured_setup
        from servelab.predict.profiles import Profile, machine_key, save_profile
        from servelab.store import Store

        # RUN… takes every word click hands it, those after -- too: a run id never starts with '-'
        cut = next((i for i, r in enumerate(runs) if r.startswith("-")), len(runs))
        runs, words = runs[:cut], [*runs[cut:], *ctx.args]
        if gpu is None:
            raise ConfigError("give --gpu: the device the runs were measured on (a catalog GPU, or cpu)")
        with Store.open(db, must_exist=True) as store:
            setup = measured_setup([store.load_run(r) for r in runs], target)
        ref = model or setup.model
        if ref is None:
            raise ConfigError("the runs do not name one model file; give --model (the .gguf or config.json)")
        slots = parallel or setup.slots or 1
        served = (
            context or setup.context_per_slot
        )  # the longest request: llama.cpp n_ctx per slot, vLLM max_model_len
        asked = PlanningInputs(
            model=ref,
            engine=setup.engine,
            quant=quant,
            context=served,
            kv_dtype=None,
            parallel=slots,
            gpus=1,
            interconnect=None,
            gpu=gpu,
            words=tuple(words),
        )
        plan, spec, card = _plan(None, asked)
        engine = emulated_engine(plan, spec, card)
        stderr_console().print(
            f"calibrating {plan.engine} {plan.quant} on {card.name} from {len(setup.records)} requests "
            f"of {len(setup.run_ids)} run(s)",
            markup=False,
        )
        result = fit(engine, setup.records)
        profile = Profile(
            machine=machine_key(card),
            machine_label=card.label,
            engine=plan.engine,
            quant=plan.quant,
            rates=result.rates,
            created=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            runs=setup.run_ids,
            model=spec.name,
            fit={
                "r2": result.r2,
                "rms_relative": result.rms_relative,
                "median_relative": result.median_relative,
                "intervals": result.intervals,
                "gaps": result.gaps,
                "prefills": result.prefills,
            },
            engine_version=setup.engine_version,
        )
        path = None if no_save else save_profile(profile)
        _render(result, profile, path, json_out)


def _render(result, profile, path: Path | None, json_out: bool) -> None:
    from dataclasses import asdict

    if json_out:
        print_json(
            {
                "profile": profile.to_json(),
                "path": None if path is None else str(path),
                "levels": [asdict(lv) for lv in result.levels],
            }
        )
        return
    e, out = result.rates, stdout_console()
    out.print(f"profile: {profile.name}", markup=False)
    out.print(
        f"effective bandwidth {e.bandwidth_bytes_s / 1e9:.2f} GB/s, compute {e.flops_s / 1e9:.1f} GFLOP/s, "
        f"step overhead {e.step_overhead_s * 1e3:.3f} ms, token overhead {e.token_overhead_s * 1e6:.2f} us"
        + (
            ""
            if e.batched_bandwidth_bytes_s is None
            else f", batched passes {e.batched_bandwidth_bytes_s / 1e9:.2f} GB/s + compute"
        )
        + ("" if e.prefill_flops_s is None else f", prompt tokens {e.prefill_flops_s / 1e9:.1f} GFLOP/s"),
        markup=False,
    )
    out.print(
        f"fit: R2 {result.r2:.4f} over {result.intervals} intervals ({result.gaps} token gaps, "
        f"{result.prefills} prefills); |residual| median {result.median_relative:.1%}, "
        f"rms {result.rms_relative:.1%}",
        markup=False,
    )
    out.print(_level_table(result.levels))
    where = f"saved to {path}" if path is not None else "not saved (--no-save)"
    stderr_console().print(f"calibration profile {where}", markup=False)


def _level_table(levels):
    from rich.table import Table

    table = Table(title="measured vs replayed with the fitted figures", title_justify="left")
    for name in (
        "level",
        "requests",
        "TTFT p50 ms",
        "fit",
        "err",
        "TPOT p50 ms",
        "fit",
        "err",
        "gap |res|",
        "prefill |res|",
    ):
        table.add_column(name, justify="right")
    for lv in levels:
        table.add_row(
            lv.level,
            str(lv.requests),
            _ms(lv.ttft_p50_s),
            _ms(lv.ttft_p50_fit_s),
            _err(lv.ttft_p50_fit_s, lv.ttft_p50_s),
            _ms(lv.tpot_p50_s),
            _ms(lv.tpot_p50_fit_s),
            _err(lv.tpot_p50_fit_s, lv.tpot_p50_s),
            _pct(lv.gap_error),
            _pct(lv.prefill_error),
        )
    return table


def _ms(seconds: float) -> str:
    return "-" if math.isnan(seconds) else f"{seconds * 1e3:.2f}"


def _err(fitted: float, measured: float) -> str:
    if math.isnan(fitted) or math.isnan(measured) or measured == 0:
        return "-"
    return f"{(fitted - measured) / measured:+.1%}"


def _pct(value: float | None) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:.1%}"

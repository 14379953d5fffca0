"""`servelab predict`: the concurrency ladder in virtual time, against an emulated engine the planner describes.

The same workload and load options as `servelab bench` (parsed by its `build_config`), the engine from a saved
plan (`--plan FILE`, from `servelab plan --save`) or from the plan options (MODEL --gpu --engine …). The run is
stored like a measured one, marked predicted in its meta (docs/predict.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from servelab.cli import planning
from servelab.cli.engine_words import flag_lines, split_model
from servelab.cli.output import stderr_console
from servelab.errors import ConfigError


def register(app: typer.Typer) -> None:
    """Add `servelab predict` to the app."""

    @app.command(
        "predict",
        context_settings={"allow_extra_args": True},
        epilog="Engine flags go after --, in the engine's own words (servelab predict MODEL --engine vllm --"
        " --max-num-seqs 64; docs/cli.md says what each sets): " + "; ".join(flag_lines()),
    )
    def predict_command(
        ctx: typer.Context,
        model: str | None = typer.Argument(
            None, help="Catalog id, .gguf file or config.json (default: the --plan file's model)."
        ),
        plan_file: Path | None = typer.Option(
            None, "--plan", help="A saved plan (`servelab plan … --save FILE`); its first fitting entry."
        ),
        gpu: str | None = planning.gpu_option("Default: the --plan file's, else rtx4090."),
        vram: float | None = planning.vram_option(),
        bandwidth: float | None = planning.bandwidth_option(),
        tflops: float | None = planning.tflops_option(),
        engine: str | None = typer.Option(
            None, "--engine", help="vllm, sglang or llamacpp (without --plan; with --cmd/--compose: theirs)."
        ),
        quant: str | None = typer.Option(None, "--quant", help="Weight format (default: the plan's best)."),
        context: int | None = typer.Option(None, "--context", help="Longest request in tokens."),
        kv_dtype: str | None = typer.Option(None, "--kv-dtype", help="KV cache dtype."),
        parallel: int = planning.parallel_option(),
        gpus: int | None = planning.gpus_option(),
        interconnect: str | None = planning.interconnect_option(),
        cmd: str | None = planning.cmd_option(),
        compose: Path | None = planning.compose_option(),
        service: str | None = planning.service_option(),
        remeasure: bool = planning.remeasure_option(),
        engine_version: str | None = planning.engine_version_option(),
        speculative: str | None = planning.speculative_option(),
        draft_model: str | None = planning.draft_model_option(),
        hf: bool = planning.hf_option(),
        spec_alpha: float | None = typer.Option(
            None, "--spec-acceptance", help="Speculative decoding: per-token acceptance probability (0-1)."
        ),
        spec_tokens: int | None = typer.Option(
            None,
            "--spec-draft-tokens",
            help="Speculative decoding: drafts per step (default: --speculative's N, else 4).",
        ),
        spec_cost: float = typer.Option(
            0.05, "--spec-draft-cost", help="Speculative decoding: one draft step over one target step."
        ),
        concurrency: str = typer.Option(
            "1,2,4,8,16", "--concurrency", help="Closed-loop concurrency levels."
        ),
        workload: str = typer.Option(
            "short", "--workload", help="short|long|mixed|shared-prefix|multi-turn|FILE."
        ),
        input_tokens: int = typer.Option(None, "--input-tokens", help="Prompt length in tokens."),
        output_tokens: int = typer.Option(None, "--output-tokens", help="Output length in tokens."),
        requests: int = typer.Option(None, "--requests", help="Measured requests per level (default 32)."),
        duration: float = typer.Option(
            None, "--duration", help="Virtual seconds per level instead of --requests."
        ),
        rate: float = typer.Option(
            None, "--rate", help="Open loop: requests/s on a seeded absolute schedule."
        ),
        burstiness: float = typer.Option(1.0, "--burstiness", help="Gamma shape of arrivals (1 = Poisson)."),
        repeat: int = typer.Option(1, "--repeat", help="Repeat each level N times."),
        warmup: int = typer.Option(
            None, "--warmup", help="Warm-up requests per level (default: one per slot)."
        ),
        cold_start: bool = typer.Option(
            False,
            "--cold-start",
            help="No warm-up requests: each level's first requests meet an idle engine (vllm bench serve).",
        ),
        slo: str = typer.Option(None, "--slo", help="Goodput SLOs, e.g. ttft_ms=500,tpot_ms=50."),
        seed: int = typer.Option(0, "--seed", help="Seed for prompts and arrivals."),
        chat: bool = typer.Option(True, "--chat/--completions", help="Chat or completions prompts."),
        config_path: Path = typer.Option(
            None, "--config", help="Experiment YAML (its settings; targets ignored)."
        ),
        name: str = typer.Option(None, "--name", help="A name for the run."),
        db: Path = typer.Option(None, "--db", help="Result store (default: the user data directory)."),
        no_store: bool = typer.Option(False, "--no-store", help="Print the prediction without storing it."),
        json_out: bool = typer.Option(False, "--json", help="Print the result as JSON on stdout."),
        no_calibration: bool = typer.Option(
            False, "--no-calibration", help="Ignore a calibration profile; use the plan's figures."
        ),
    ) -> None:
        """Predict the benchmark ladder of an engine that is not running yet (virtual time, from the plan; engine
        flags after --)."""
        from servelab.bench.config import load_experiment
        from servelab.cli.bench import _merge_yaml, build_config

        options: dict[str, Any] = {
            "targets": ["predict"],
            "concurrency": concurrency,
            "workload": workload,
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "requests": requests,
            "duration": duration,
            "rate": rate,
            "burstiness": burstiness,
            "repeat": repeat,
            "warmup": warmup,
            "slo": slo,
            "seed": seed,
            "name": name,
            "chat": chat,
        }
        if config_path is not None:
            options = {**_merge_yaml(options, load_experiment(config_path)), "targets": ["predict"]}
        options = _cold_start(options, cold_start)
        config = build_config(options, None)
        model, words = split_model(model, ctx.args)
        inputs = planning.inputs(ctx, model, words)
        plan, spec, card = _plan(plan_file, inputs)
        speculation = _speculation(spec_alpha, spec_tokens or planned_tokens(plan) or 4, spec_cost)
        if speculation is None and planned_tokens(plan):
            stderr_console().print(
                f"the plan drafts {planned_tokens(plan)} tokens per step ({plan.details.get('speculative_method')});"
                " give --spec-acceptance P to price it (without it every step decodes one token)",
                markup=False,
            )
        result, pricing = _predict(
            config,
            plan,
            spec,
            card,
            plan_file,
            speculation,
            None if no_store else db,
            store=not no_store,
            calibration=not no_calibration,
        )
        _render(result, pricing, json_out)


def _cold_start(options: dict[str, Any], cold: bool) -> dict[str, Any]:
    """--cold-start: no warm-up requests (docs/predict.md); with --warmup N it is one line."""
    if not cold:
        return options
    if options.get("warmup") not in (None, 0):
        raise ConfigError(f"--cold-start runs no warm-up requests; drop --warmup {options['warmup']}")
    return {**options, "warmup": 0}


def planned_tokens(plan) -> int | None:
    """The tokens drafted per step the plan was made with (its `speculative` details), None without."""
    value = plan.details.get("speculative_tokens")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _speculation(alpha: float | None, gamma: int, cost: float):
    if alpha is None:
        return None
    from servelab.ranges import count, number
    from servelab.scheduling.core import Speculation
    from servelab.speculative.theory import expected_tokens_per_step

    number(alpha, "--spec-acceptance", 0, 1)
    count(gamma, "--spec-draft-tokens", 1, 16, "tokens")
    number(cost, "--spec-draft-cost", 0, 10)
    return Speculation(gamma, expected_tokens_per_step(alpha, gamma), cost)


def _plan(plan_file: Path | None, asked: planning.PlanningInputs):
    """(Plan, ModelSpec, GPU): the saved plan's first fitting entry on the card it was made for (its recorded
    --vram/--bandwidth/--tflops), or a plan made from the options as `servelab plan` makes it."""
    if plan_file is not None:
        return _from_saved(plan_file, asked)
    if asked.cmd is None and asked.compose is None and (asked.model is None or asked.engine is None):
        raise ConfigError("give MODEL and --engine (vllm, sglang, llamacpp), --cmd/--compose, or --plan FILE")
    planned = planning.make_plans(asked, as_asked=False)  # predict emulates the best fitting variant
    plans = planned.plans.plans
    plan = next((p for p in plans if p.fits), plans[0])
    if not plan.fits:
        raise ConfigError(
            f"{plan.engine} {plan.quant} does not fit: {'; '.join(plan.refusals) or 'see servelab plan'}"
        )
    if planned.note is not None:
        stderr_console().print(planned.note, markup=False)
    return plan, planned.model, planned.card


# what a saved plan fixes: the options that would re-plan it (--bandwidth/--tflops only re-price its steps)
_FIXED_BY_PLAN = (
    ("--vram", "vram"),
    ("--engine-version", "engine_version"),
    ("--speculative", "speculative"),
    ("--draft-model", "draft_model"),
    ("--cmd", "cmd"),
    ("--compose", "compose"),
)


def _from_saved(plan_file: Path, asked: planning.PlanningInputs):
    from servelab.model.load import load_model

    if asked.words:
        raise ConfigError(f"--plan {plan_file} fixes the engine's settings; drop the words after --")
    for flag, name in _FIXED_BY_PLAN:
        if getattr(asked, name) is not None:
            raise ConfigError(
                f"--plan {plan_file} was made with its own {flag[2:]}; drop {flag}, or re-plan"
                f" (servelab plan … {flag} … --save FILE)"
            )
    plan = _saved_plan(plan_file)
    ref = asked.model or plan.model
    try:
        spec = load_model(ref, hf=asked.hf)
    except ConfigError as exc:
        raise ConfigError(f"--plan {plan_file}: cannot read its model {ref!r} ({exc}); give MODEL") from exc
    if asked.gpu is not None and asked.gpu != plan.gpu:
        from servelab.hardware.gpus import card_for

        return plan, spec, card_for(asked.gpu, bandwidth_gb_s=asked.bandwidth, tflops=asked.tflops)
    return plan, spec, planning.card_of_plan(plan.gpu, plan.card, asked.bandwidth, asked.tflops)


def _saved_plan(path: Path):
    from servelab.plan.io import PLAN_HINT, read_json_object
    from servelab.sizing.types import Plan

    data = read_json_object(path, "--plan", PLAN_HINT)
    entries = data.get("plans")
    if not isinstance(entries, list) or not entries or not all(isinstance(e, dict) for e in entries):
        raise ConfigError(
            f"--plan {path}: no plan entries (a non-empty 'plans' list of objects); {PLAN_HINT}"
        )
    plans = [Plan.from_json(e, f"--plan {path}: plans[{i}]") for i, e in enumerate(entries)]
    return next((p for p in plans if p.fits), plans[0])


def emulated_target(plan_file: Path | None, asked: planning.PlanningInputs):
    """(EmulatedEngine, model name) for `servelab sim --emulate`: the engine predict would emulate."""
    from servelab.predict.machine import emulated_engine

    plan, spec, card = _plan(plan_file, asked)
    return emulated_engine(plan, spec, card), plan.model or spec.name


def calibration_profile(plan, card, use: bool):
    """The matching calibration profile (None: none, or --no-calibration), said on stderr."""
    from servelab.predict.profiles import find_profile

    found = find_profile(card, plan.engine, plan.quant) if use else None
    if found is None:
        return None
    profile, path = found
    release = "" if profile.engine_version is None else f", {profile.engine} {profile.engine_version}"
    stderr_console().print(
        f"calibration profile {profile.name}, {profile.created[:10]} (fit R2 {profile.fit.get('r2', float('nan')):.3f}, "
        f"runs {', '.join(profile.runs)}{release}): {path}; --no-calibration ignores it",
        markup=False,
    )
    return profile


def pricing_for(plan, spec, card, calibration: bool):
    """`machine.price` with what this machine has: its calibration profile (unless --no-calibration) and the
    shipped (or $SERVELAB_STEP_MODEL) step model."""
    from servelab.predict.machine import price
    from servelab.predict.stepmodel import load_step_model

    profile = calibration_profile(plan, card, calibration)
    return price(plan, card, spec, profile=profile, step_model=None if profile else load_step_model())


def provenance_lines(pricing) -> list[str]:
    """What a user reads about where the figures came from: the source, and a stale profile's warning."""
    p = pricing.provenance
    lines = [f"figures from: {p.source} ({p.detail})"]
    if p.source != "corpus":
        lines[0] += "; no band (only the corpus fit is cross-validated: docs/predict.md)"
    if p.stale is not None:
        lines.append(f"stale: {p.stale}")
    return lines


def _predict(config, plan, spec, card, plan_file, speculation, db, *, store: bool, calibration: bool = True):
    from servelab.predict.machine import emulated_engine
    from servelab.predict.run import PredictTarget, predict

    pricing = pricing_for(plan, spec, card, calibration)
    engine = emulated_engine(plan, spec, card, speculation=speculation, pricing=pricing)
    link = plan.parallel_cost.interconnect if plan.parallel_cost else None
    version = plan.details.get("engine_version")
    target = PredictTarget(
        engine=plan.engine,
        model=plan.model or spec.name,
        gpu=plan.gpu or card.name,
        quant=plan.quant,
        tensor_parallel=plan.tensor_parallel,
        interconnect=link,
        plan_file=None if plan_file is None else str(plan_file),
        engine_version=version if isinstance(version, str) else None,
    )
    stderr_console().print(
        f"predicting {plan.engine} {plan.quant} on {plan.tensor_parallel} x {card.name} "
        f"(effective figures: {engine.roofline.rates.source}; virtual time)",
        markup=False,
    )
    from servelab.cli.live_view import LadderView

    view = LadderView(stderr_console(), config.lag_limit_ms, predicted=True)
    try:
        if not store:
            return predict(config, engine, target, progress=view.update), pricing
        from servelab.store import Store

        with Store.open(db) as opened:
            return predict(config, engine, target, opened, progress=view.update), pricing
    finally:
        view.close()


def _render(result, pricing, json_out: bool) -> None:
    """The ladder with each figure's band (`21.3 (17-26)`), where the figures came from; --json: the bench's
    document with `pricing` (source, detail, stale) and each level's `predicted` figures."""
    from servelab.cli.output import print_json, stdout_console

    if json_out:
        if pricing.provenance.stale is not None:
            stderr_console().print(f"stale: {pricing.provenance.stale}", markup=False)
        print_json({**result.to_json(), "pricing": pricing.provenance.to_json()})
        return
    console = stdout_console()
    for target in result.targets:
        console.print(_ladder_table(target))
    for line in provenance_lines(pricing):
        console.print(line, markup=False)
    if any(
        f.get("band")
        for t in result.targets
        for lv in t.levels
        for f in lv.predicted.get("figures", {}).values()
    ):
        console.print(
            "(lo-hi): the figure's band, the 10th-90th percentile of measured / predicted over the rows"
            " of its regime cross-validation left out (docs/predict.md)",
            markup=False,
        )
    state = "partial (interrupted)" if result.partial else "complete"
    console.print(f"run {result.run_id}: {state}", markup=False)


def _ladder_table(target):
    """bench's ladder columns, each banded figure with its band."""
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    from servelab.predict.bands import with_band

    table = Table(
        title=escape(f"{target.url} ({target.engine}, {target.model}) · predicted"),
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        collapse_padding=True,
    )
    for column in (
        "level",
        "stream\ntok/s\np50",
        "output\ntok/s",
        "TTFT\np50 ms",
        "TTFT\np99 ms",
        "TPOT\np50 ms",
        "ITL\np50 ms",
        "ITL\np99 ms",
        "errors",
        "evicted",
    ):
        table.add_column(column, justify="right", overflow="fold")
    for lv in target.levels:
        s, banded = lv.stats, lv.predicted.get("figures", {})

        def cell(key: str, value: float | None, banded: dict = banded) -> str:
            return with_band(value, banded.get(key, {}).get("band"))

        table.add_row(
            s.level.label,
            cell("per_stream_tok_s_p50", s.per_stream_tok_s.p50),
            cell("output_tok_s", s.output_tok_s),
            cell("ttft_ms_p50", s.ttft_ms.p50),
            with_band(s.ttft_ms.p99, None),
            cell("tpot_ms_p50", s.tpot_ms.p50),
            cell("itl_ms_p50", s.itl_ms.p50),
            with_band(s.itl_ms.p99, None),
            str(s.errors),
            str(s.evictions),
        )
    return table

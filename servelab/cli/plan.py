"""`servelab plan`: will a model fit, with which engine flags, and how fast can it possibly go."""

from __future__ import annotations

from pathlib import Path

import typer

from servelab.cli import planning
from servelab.cli.engine_words import flag_lines, split_model
from servelab.cli.output import print_json, stderr_console, stdout_console, to_jsonable
from servelab.engines import registry
from servelab.errors import ConfigError


def _emit(plan, emit: str, host: str, gpus: int, card) -> str:
    from servelab.engines.registry import get_engine
    from servelab.plan.emit import dockerfile, plan_compose

    if emit == "cmd":
        return plan.command_line
    engine = get_engine(plan.engine)
    port = int(plan.command[plan.command.index("--port") + 1])
    build = (
        engine.source_build(plan.quant) if engine.source_build else None
    )  # the official image cannot load it
    if emit == "dockerfile":
        if build is None:
            raise ConfigError(
                f"{plan.quant} loads in {engine.label}'s official image ({engine.image}): use --emit compose"
            )
        return dockerfile(build, card.compute_capability, port=port, health_path=engine.health_path).rstrip(
            "\n"
        )
    return plan_compose(plan, host=host, gpus=gpus, compute_capability=card.compute_capability)


def register(app: typer.Typer) -> None:
    """Add `servelab plan` to the app."""

    @app.command(
        "plan",
        context_settings={"allow_extra_args": True},
        epilog="Engine flags go after --, in the engine's own words (servelab plan MODEL --engine vllm --"
        " --max-num-seqs 64; docs/cli.md says what each sets): " + "; ".join(flag_lines()),
    )
    def plan_command(
        ctx: typer.Context,
        model: str | None = typer.Argument(
            None,
            help="Catalog id (Qwen/Qwen3.5-27B), a .gguf file, config.json or model dir (with --cmd/--compose:"
            " default the launch's model).",
        ),
        gpu: str | None = planning.gpu_option(),
        engine: str = typer.Option(
            "all", "--engine", help=f"{', '.join(e.name for e in registry.planned())} or all."
        ),
        quant: str = typer.Option("all", "--quant", help="Weight format (awq, fp8, bf16, Q4_K_M, …) or all."),
        context: int | None = typer.Option(
            None, "--context", help="Longest request in tokens (default: the model's)."
        ),
        kv_dtype: str | None = typer.Option(
            None, "--kv-dtype", help="KV cache dtype: bf16, fp8_e5m2, fp8_e4m3, q8_0, q4_0 …"
        ),
        parallel: int = planning.parallel_option(),
        gpus: int | None = planning.gpus_option(),
        interconnect: str | None = planning.interconnect_option(),
        vram: float | None = planning.vram_option(),
        bandwidth: float | None = planning.bandwidth_option(),
        tflops: float | None = planning.tflops_option(),
        hf: bool = planning.hf_option(),
        emit: str | None = typer.Option(
            None,
            "--emit",
            help="Print the launch recipe: cmd, compose, or dockerfile (a fork for formats only it loads).",
        ),
        host: str = typer.Option("127.0.0.1", "--host", help="Address the launched server binds."),
        remeasure: bool = planning.remeasure_option(),
        cmd: str | None = planning.cmd_option(),
        compose: Path | None = planning.compose_option(),
        service: str | None = planning.service_option(),
        speculative: str | None = planning.speculative_option(),
        draft_model: str | None = planning.draft_model_option(),
        engine_version: str | None = planning.engine_version_option(),
        save: Path | None = typer.Option(None, "--save", help="Also write the JSON plan to this file."),
        json_out: bool = typer.Option(False, "--json", help="Print the plan as JSON."),
        no_calibration: bool = typer.Option(
            False, "--no-calibration", help="Ignore a calibration profile (servelab calibrate)."
        ),
    ) -> None:
        """Plan memory, flags and speed ceilings for serving MODEL (engine flags after --)."""
        from servelab.plan.emit import check_emit

        check_emit(emit)
        model, words = split_model(model, ctx.args)
        asked = planning.inputs(ctx, model, words)
        planned = planning.make_plans(asked)
        plans, spec, card, gpu_note = planned.plans, planned.model, planned.card, planned.note
        if gpu_note is not None:  # after every check, so that bad input stays one line
            stderr_console().print(gpu_note, markup=False)
        if not no_calibration:
            _calibrated_line(plans, spec, card)
        plans = priced_plans(plans, spec, card, calibration=not no_calibration)
        _output(plans, json_out=json_out, emit=emit, host=host, save=save, card=card)


def priced_plans(plans, spec, card, *, calibration: bool):
    """Each plan with its expected speeds priced as `servelab predict` prices its steps (`machine.price`: this
    machine's calibration profile, else the corpus-fitted step model on a GPU, else the plan's own figures)."""
    import dataclasses

    from servelab.predict.machine import price
    from servelab.predict.profiles import find_profile
    from servelab.predict.speeds import priced_plan
    from servelab.predict.stepmodel import load_step_model

    model = load_step_model()
    priced = []
    for plan in plans.plans:
        found = find_profile(card, plan.engine, plan.quant) if calibration else None
        pricing = price(plan, card, spec, profile=None if found is None else found[0], step_model=model)
        priced.append(priced_plan(plan, spec, card, pricing))
    return dataclasses.replace(plans, plans=tuple(priced))


def _calibrated_line(plans, spec, card) -> None:
    """A calibration profile for the best fitting plan's engine x format on this card: what its measured
    figures give (stderr; the expected speeds are priced with them too: `priced_plans`)."""
    from servelab.predict.machine import roofline
    from servelab.predict.profiles import calibrated_speeds, find_profile

    best = next((p for p in plans.plans if p.fits), None)
    found = None if best is None else find_profile(card, best.engine, best.quant)
    if best is None or found is None:
        return
    profile, path = found
    decode, prefill = calibrated_speeds(roofline(best, spec, card, profile.rates))
    stderr_console().print(
        f"calibration profile {profile.name}, {profile.created[:10]} ({path}): measured figures give "
        f"{decode:.1f} tok/s single-stream decode, {prefill:.0f} tok/s prefill (1,024-token prompt); "
        "the expected speeds below are priced with it; --no-calibration ignores it",
        markup=False,
    )


def _output(plans, *, json_out: bool, emit: str | None, host: str, save: Path | None, card) -> None:
    import json

    from servelab.plan.emit import shell_line
    from servelab.plan.render import comparison_table, remedy_lines, render_plan

    if save is not None:
        try:
            save.write_text(json.dumps(to_jsonable(plans), indent=2) + "\n", encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"--save {save}: cannot write it ({exc.strerror or exc})") from exc
        stderr_console().print(f"plan saved to {save}", markup=False)
    best = next((p for p in plans.plans if p.fits), plans.plans[0])
    if emit is not None and not best.fits and len(plans.plans) == 1:  # one launch as asked
        remedy = f"; it fits with {shell_line(best.fits_with)}" if best.fits_with else ""
        stderr_console().print(
            f"warning: {best.engine} {best.quant} does not fit as asked{remedy}; this recipe is the launch"
            " as asked",
            markup=False,
        )
    elif emit is not None and not best.fits:
        stderr_console().print(
            f"warning: nothing fits; this recipe is for {best.engine} {best.quant}, which does "
            "not fit either",
            markup=False,
        )
    if json_out:
        recipe = (
            {}
            if emit is None
            else {"recipe": {"format": emit, "text": _emit(best, emit, host, plans.gpus, card)}}
        )
        print_json({**to_jsonable(plans), **recipe})
    elif emit is not None:
        typer.echo(_emit(best, emit, host, plans.gpus, card))
    elif len(plans.plans) == 1:
        render_plan(stdout_console(), best)
    else:
        console = stdout_console()
        console.width = max(console.width, 110)
        console.print(comparison_table(plans))
        for line in remedy_lines(plans):
            console.print(line, markup=False)
        console.print(f"best: {best.engine} {best.quant} — {best.command_line}", markup=False)
        if best.device_note:
            console.print(f"device: {best.device_note}", markup=False)
        if not best.fits:
            stderr_console().print(
                "nothing fits: lower --context, pick a smaller --quant or add GPUs", markup=False
            )

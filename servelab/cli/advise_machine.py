"""`servelab advise --gpu auto` without a MODEL: which models fit this machine (advise/machine.py), and the device
`--gpu auto` resolves to for `advise` (this machine's GPUs through NVML, else its CPU)."""

from __future__ import annotations

from typing import Any

import typer

from servelab.errors import ConfigError

SHOWN_UNRANKED = 12


def device(gpu: str, gpus: int | None) -> tuple[Any, int, str | None]:
    """(the card, how many, `--gpu auto`'s note) for `--gpu`/`--gpus` as given."""
    from servelab.cli.planning import card, gpu_count

    found, count, note = card(gpu, None, None, None)
    return found, gpu_count(gpus, count), note


def offered_models(catalog: bool, local: bool) -> list[Any]:
    """The catalog's models and those on disk (model/local.py), as advise/machine.py weighs them."""
    from dataclasses import replace

    from servelab.advise.machine import Offered
    from servelab.model.catalog import catalog_ids, catalog_model
    from servelab.model.local import find_local_models

    out = [Offered(i, "catalog", catalog_model(i)) for i in catalog_ids()] if catalog else []
    for m in find_local_models() if local else []:
        # a GGUF is launched by its path (llama-server -m), a Hugging Face repository by its id
        spec = (
            None
            if m.spec is None
            else replace(m.spec, name=m.name if m.store == "huggingface" else str(m.path))
        )
        out.append(Offered(m.name, m.store, spec, str(m.path), m.error))
    if not out:
        raise ConfigError(
            "no models to weigh: none found on disk (Hugging Face cache, Ollama, llama.cpp, LM Studio)"
            + (" and --no-catalog given" if not catalog else "")
            + "; give a MODEL or drop --no-catalog"
        )
    return out


def machine(
    setting: Any,
    *,
    context: int,
    engines: tuple[str, ...] | None,
    runner: Any,
    models: list[Any],
    note: str | None,
    json_out: bool,
) -> None:
    """Search every model, print the ranking (or its JSON)."""
    from servelab.advise.machine import machine_advice
    from servelab.cli.advise_progress import progress_bar

    with progress_bar("models") as progress:
        rows = machine_advice(
            models, setting, context=context, engines=engines, runner=runner, progress=progress
        )
    if json_out:
        from servelab.cli.output import print_json

        print_json(
            {
                "gpu": setting.gpu.name,
                "gpus": setting.gpus,
                "note": note,
                "context": context,
                "slo": {b.key: b.limit_ms for b in setting.bounds},
                "models": [r.to_json() for r in rows],
            }
        )
        return
    for line in lines(rows, setting, context, note):
        typer.echo(line)


def lines(rows: list[Any], setting: Any, context: int, note: str | None) -> list[str]:
    """The ranking for a person: one line per model that has a best configuration, then why the others lack one."""
    slo = ", ".join(f"{b.key}<={b.limit_ms:g}" for b in setting.bounds)
    ranked = [r for r in rows if r.best is not None]
    out = [
        f"models on {setting.gpus} x {setting.gpu.name}, context {context}, SLO {slo}: {len(ranked)} of"
        f" {len(rows)} deliver within it"
    ]
    if note:
        out.append(note)
    for rank, r in enumerate(ranked, 1):
        b = r.best
        load = f"{int(b.load)} users" if b.stats.level.rate_rps is None else f"{b.load:.3g} req/s"
        single = (
            f"TPOT {r.single_tpot_ms:.1f} ms ({r.single_tok_s:.1f} tok/s)" if r.single_tpot_ms else "no TPOT"
        )
        out.append(f"{rank}. {r.model.name} ({r.model.source}): {b.point.name}")
        out.append(
            f"   1 user: {single}; aggregate {b.output_tok_s:.1f} tok/s at {b.replicas} x {load},"
            f" p99 TTFT {b.p99('ttft_ms'):.0f} ms"
        )
        out.append(f"   $ {b.point.plan.command_line}")
    others = [r for r in rows if r.best is None]
    if others:
        out.append("not here:")
        out += [f"  {r.model.name} ({r.model.source}): {r.reason}" for r in others[:SHOWN_UNRANKED]]
        if len(others) > SHOWN_UNRANKED:
            out.append(f"  … {len(others) - SHOWN_UNRANKED} more (--json)")
    return out

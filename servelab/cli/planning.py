"""The planning inputs `plan` and `predict` share: one declaration of each option (`--gpu`, `--vram`,
`--bandwidth`, `--tflops`, `--gpus`, `--engine-version`, `--speculative`, `--draft-model`, `--hf`) and one reader of
each, so that the two commands take the same words with the same meaning and the same one-line errors."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from servelab.engines import registry
from servelab.errors import ConfigError

if TYPE_CHECKING:
    from servelab.hardware.gpus import GPU
    from servelab.plan.fit import Speculative
    from servelab.plan.types import PlannedCard


def gpu_option(default_text: str = "Default rtx4090.") -> Any:
    return typer.Option(
        None, "--gpu", help=f"GPU name from the catalog, or auto: this machine's (NVML). {default_text}"
    )


def vram_option() -> Any:
    return typer.Option(None, "--vram", help="Override GPU memory, GiB.")


def bandwidth_option() -> Any:
    return typer.Option(None, "--bandwidth", help="Override memory bandwidth, GB/s.")


def tflops_option() -> Any:
    return typer.Option(None, "--tflops", help="Override dense BF16 TFLOPS.")


def gpus_option() -> Any:
    return typer.Option(
        None, "--gpus", help="GPUs for tensor parallelism (default 1; with --gpu auto, all it found)."
    )


def engine_version_option() -> Any:
    return typer.Option(
        None,
        "--engine-version",
        help="The --engine's release whose rules to plan (vLLM 0.10.1, sglang 0.4.4.post1, llama.cpp b8354;"
        " default the current one; --cmd/--compose: the image tag's).",
    )


def speculative_option() -> Any:
    return typer.Option(
        None,
        "--speculative",
        help="Speculative decoding METHOD:N (mtp, eagle, ngram, draft; N tokens drafted per step).",
    )


def draft_model_option() -> Any:
    return typer.Option(
        None, "--draft-model", help="The draft for --speculative eagle:N / draft:N (an id or a file)."
    )


def hf_option() -> Any:
    return typer.Option(False, "--hf", help="Fetch config and safetensors headers from the Hugging Face Hub.")


def card(name: str | None, vram: float | None, bandwidth: float | None, tflops: float | None):
    """The card to plan for, how many `--gpu auto` found (None when the card was named) and its note."""
    from servelab.hardware.gpus import card_for, with_overrides

    if name is None or name.lower() != "auto":
        return card_for(name, vram_gib=vram, bandwidth_gb_s=bandwidth, tflops=tflops), None, None
    from servelab.diagnose.gpus import local_device
    from servelab.diagnose.probe import RealProbe

    with RealProbe() as probe:
        local = local_device(probe, bandwidth_gb_s=bandwidth, tflops=tflops)
    if local.gpu is None:  # no GPU: the CPU is the device
        try:
            found = card_for(local.device, vram_gib=vram, bandwidth_gb_s=bandwidth, tflops=tflops)
        except ConfigError as exc:
            raise ConfigError(f"{local.note}, but: {exc}") from exc
        return found, None, local.note
    return with_overrides(local.gpu, vram_gib=vram), local.count, local.note


def gpu_count(asked: int | None, found: int | None) -> int:
    """--gpus as asked, else what --gpu auto found, else 1; more than auto found is one line."""
    if found is not None and asked is not None and asked > found:
        raise ConfigError(f"--gpus {asked}, but --gpu auto found {found}: give --gpus {found} or fewer")
    return asked if asked is not None else found or 1


def check_engine_version(engine_version: str | None, engine: str | None) -> None:
    """--engine-version names one engine's release: it needs that engine named."""
    if engine_version is not None and (engine is None or engine.lower() == "all"):
        raise ConfigError(
            f"--engine-version {engine_version} is one engine's release: name it with --engine"
            f" ({', '.join(e.name for e in registry.planned())})"
        )


def speculative(option: str | None, draft_model: str | None, hf: bool) -> Speculative | None:
    """--speculative METHOD:N [--draft-model REF] as plan settings (None: neither given); a malformed value is
    one line."""
    if option is None and draft_model is None:
        return None
    from servelab.model.load import load_model
    from servelab.plan.fit import SPECULATIVE_METHODS, Speculative

    method, _, tokens = (option or "").partition(":")
    if option is None or not tokens.isdigit():
        raise ConfigError(
            f"--speculative {option!r}: give METHOD:N, METHOD one of {', '.join(SPECULATIVE_METHODS)} (mtp:3)"
        )
    draft = load_model(draft_model, hf=hf) if draft_model else None
    path = launch_path(draft_model) if draft_model else ""
    return Speculative(method.lower(), int(tokens), draft=draft, draft_path=path)


def speculative_asked(
    engine: str, own: Mapping[str, object], option: str | None, draft_model: str | None, hf: bool
) -> Speculative | None:
    """Speculative decoding as asked: by --speculative/--draft-model, or by the engine's own flags after -- (its
    Settings, read by its `Planner.speculative_words`), never both; None when neither asks for it."""
    chosen = registry.get_engine(engine) if engine.lower() != "all" else None
    reader = chosen.planner.speculative_words if chosen and chosen.planner else None
    words = reader(own[chosen.name]) if reader is not None and chosen and chosen.name in own else None
    if words is None:
        return speculative(option, draft_model, hf)
    if option is not None or draft_model is not None:
        raise ConfigError(
            f"speculative decoding asked twice: by --speculative/--draft-model and by {chosen and chosen.label}'s"
            " own flags after --; keep one"
        )
    from servelab.model.load import load_model
    from servelab.plan.fit import Speculative

    draft = load_model(words.draft_path, hf=hf) if words.draft_path else None
    path = launch_path(words.draft_path) if words.draft_path else ""
    return Speculative(words.method, words.num_tokens, draft=draft, draft_path=path)


def launch_path(model: str) -> str:
    """A local model as an absolute path, so the command and the compose mount work from any directory."""
    return str(Path(model).absolute()) if Path(model).exists() else model


def card_of_plan(
    name: str, planned: PlannedCard | None, bandwidth: float | None, tflops: float | None
) -> GPU:
    """The card a saved plan was made for: the catalog entry `name` with the figures the plan recorded where they
    differ (`Plan.card`: its --vram/--bandwidth/--tflops; a custom card's are all it has), then this command's
    --bandwidth/--tflops on top. A plan saved before plans recorded their card: the catalog entry."""
    from servelab.hardware.gpus import card_for, with_overrides

    if planned is not None and name == "custom":
        base = with_overrides(
            None,
            vram_gib=planned.memory_mib / 1024,
            bandwidth_gb_s=planned.bandwidth_gb_s,
            tflops=planned.bf16_tflops,
        )
    else:
        base = card_for(name)
        if planned is not None:
            base = with_overrides(
                base,
                vram_gib=None if planned.memory_mib == base.memory_mib else planned.memory_mib / 1024,
                bandwidth_gb_s=None
                if planned.bandwidth_gb_s == base.bandwidth_gb_s
                else planned.bandwidth_gb_s,
                tflops=None if planned.bf16_tflops == base.bf16_tflops else planned.bf16_tflops,
            )
    return with_overrides(base, bandwidth_gb_s=bandwidth, tflops=tflops)

"""The planning inputs `plan` and `predict` share: one declaration of each option (`--gpu`, `--vram`,
`--bandwidth`, `--tflops`, `--gpus`, `--parallel`, `--interconnect`, `--engine-version`, `--speculative`,
`--draft-model`, `--hf`, `--cmd`, `--compose`, `--service`, `--remeasure`), one reader of each, and one
`PlanningInputs` made from a command's options (`inputs`), so that the two commands take the same words with the
same meaning and the same one-line errors."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from servelab.cli.engine_words import engine_settings
from servelab.engines import registry
from servelab.errors import ConfigError

if TYPE_CHECKING:
    from servelab.hardware.gpus import GPU
    from servelab.model.spec import ModelSpec
    from servelab.sizing.fit import Speculative
    from servelab.sizing.types import PlannedCard, PlanSet


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


def parallel_option() -> Any:
    return typer.Option(1, "--parallel", help="Concurrent sequences to plan for (llama.cpp -np).")


def interconnect_option() -> Any:
    return typer.Option(None, "--interconnect", help="nvlink, pcie-p2p or pcie-host-staged.")


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
    from servelab.sizing.fit import SPECULATIVE_METHODS, Speculative

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
    from servelab.sizing.fit import Speculative

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


def remeasure_option() -> Any:
    return typer.Option(
        False, "--remeasure", help="--gpu cpu: measure this machine's memory bandwidth again."
    )


def cmd_option() -> Any:
    return typer.Option(
        None, "--cmd", help="Plan this launch command exactly (llama-server …, vllm serve …, sglang)."
    )


def compose_option() -> Any:
    return typer.Option(
        None, "--compose", help="Plan the engine service of this docker-compose file exactly."
    )


def service_option() -> Any:
    return typer.Option(None, "--service", help="The --compose service to plan.")


@dataclass(frozen=True, kw_only=True)
class PlanningInputs:
    """What `plan` and `predict` were asked, as given (None: not given; engine and quant None or "all": every
    one); `words`: the engine's own flags after --."""

    model: str | None = None
    engine: str | None = None
    quant: str | None = None
    context: int | None = None
    kv_dtype: str | None = None
    parallel: int = 1
    gpus: int | None = None
    interconnect: str | None = None
    gpu: str | None = None
    vram: float | None = None
    bandwidth: float | None = None
    tflops: float | None = None
    engine_version: str | None = None
    speculative: str | None = None
    draft_model: str | None = None
    hf: bool = False
    words: tuple[str, ...] = ()
    cmd: str | None = None
    compose: Path | None = None
    service: str | None = None
    host: str = "127.0.0.1"
    remeasure: bool = False


def inputs(ctx: typer.Context, model: str | None, words: Sequence[str]) -> PlanningInputs:
    """What a command that plans was asked: each of its options named as a `PlanningInputs` field (`plan`'s and
    `predict`'s declare them with those names), with MODEL and the engine's words after -- as `split_model` left
    them; a field the command does not take keeps its default."""
    given = {f.name: ctx.params[f.name] for f in dataclasses.fields(PlanningInputs) if f.name in ctx.params}
    return PlanningInputs(**{**given, "model": model, "words": tuple(words)})


@dataclass(frozen=True)
class MadePlans:
    """The plans made for a `PlanningInputs`, the model and card they were made for, and `--gpu auto`'s note."""

    plans: PlanSet
    model: ModelSpec
    card: GPU
    note: str | None


def make_plans(asked: PlanningInputs, *, as_asked: bool = True) -> MadePlans:
    """The plans `servelab plan` makes for what was asked (`predict` emulates the first that fits): a launch
    exactly (--cmd/--compose), one engine x format as asked (its verdict and the flags that make it fit), or
    every sensible candidate compared (a search). `as_asked` False: one engine x format is searched instead, its
    best fitting variant planned (what `predict` emulates)."""
    from servelab.hardware.gpus import INTERCONNECTS, default_interconnect
    from servelab.model.load import load_model
    from servelab.plan.make import check_plan_numbers, compare_plans, plan_as_asked, plan_set, search_plan
    from servelab.sizing.typed import given

    if asked.interconnect is not None and asked.interconnect not in INTERCONNECTS:
        raise ConfigError(f"--interconnect {asked.interconnect!r}; choose one of: {', '.join(INTERCONNECTS)}")
    if asked.remeasure:
        from servelab.hardware.host import this_machine

        this_machine(remeasure=True)  # refreshes the cache that --gpu cpu reads
    engine, model = asked.engine or "all", asked.model
    launch = _read_launch(asked.cmd, asked.compose, asked.service, engine)
    if launch is not None:
        engine, model = launch.engine, model or launch.model
        launch.check_version(asked.engine_version)
    check_engine_version(asked.engine_version, engine)
    if model is None:
        raise ConfigError(
            "give MODEL (a catalog id, .gguf file, config.json or model dir), or --cmd/--compose (see `servelab plan --help`, `servelab predict --help`)"
        )
    card_, found, note = card(asked.gpu, asked.vram, asked.bandwidth, asked.tflops)
    gpus = gpu_count(asked.gpus, found)
    if launch is not None and launch.settings.tp is not None:
        gpus = launch.settings.tp
    check_plan_numbers(asked.context, asked.parallel, gpus)
    if engine.lower() != "all":
        engine = registry.get_engine(engine, registry.planned(), also=("all",)).name
    own = engine_settings(engine, list(asked.words))  # each engine's own knobs: the words and the environment
    if launch is not None and launch.settings.engine is not None:  # the launch's own flags win
        launched = launch.settings.engine
        own[engine] = dataclasses.replace(own[engine], **given(launched)) if engine in own else launched
    spec = load_model(model, hf=asked.hf)
    flags: dict[str, Any] = {} if asked.engine_version is None else {"engine_version": asked.engine_version}
    drafted = speculative_asked(engine, own, asked.speculative, asked.draft_model, asked.hf)
    if drafted is not None:
        flags["speculative"] = drafted
    common: dict[str, Any] = dict(
        context=asked.context,
        kv_dtype=asked.kv_dtype,
        parallel=asked.parallel,
        gpus=gpus,
        interconnect=asked.interconnect,
        model_path=launch_path(model),
        host=asked.host,
        **flags,
    )
    quant = None if asked.quant is None or asked.quant.lower() == "all" else asked.quant
    link = asked.interconnect or default_interconnect(card_)
    if launch is not None:  # exactly that launch: its engine, its settings, its (or the model's) format
        common.update(launch.plan_options(), model_path=launch.settings.model or common["model_path"])
        common["settings"] = own.get(engine)
        chosen = plan_as_asked(spec, card_, engine=engine, quant=launch.settings.quant or quant, **common)
        plans = plan_set(launch.annotate(chosen), gpus, link)
    elif engine.lower() != "all" and quant is not None:  # one launch: as asked (plan), or searched (predict)
        planner = plan_as_asked if as_asked else search_plan
        one = planner(spec, card_, engine=engine, quant=quant, settings=own.get(engine), **common)
        plans = plan_set(one, gpus, link)
    else:  # a search: each engine x format's best fitting variant
        engines = None if engine.lower() == "all" else (engine,)
        plans = compare_plans(spec, card_, engines=engines, quant=quant, engine_settings=own, **common)
    return MadePlans(plans, spec, card_, note)


def _read_launch(cmd: str | None, compose: Path | None, service: str | None, engine: str):
    """The launch `--cmd`/`--compose` name (None without either)."""
    if cmd is None and compose is None and service is None:
        return None
    from servelab.verify.launch_read import read_launch

    return read_launch(
        cmd=cmd, compose=compose, service=service, engine=None if engine.lower() == "all" else engine
    )

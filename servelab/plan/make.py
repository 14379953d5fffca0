"""`make_plan`: one engine, one quantization, one context on one GPU type; `compare_plans`: every sensible
(engine, quant) candidate side by side. Pure: a ModelSpec and a GPU in, frozen dataclasses out."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from typing import Any, cast

from servelab.engines import registry
from servelab.engines.base import Engine, Planner
from servelab.errors import ConfigError, ModelFormatError
from servelab.hardware.gpus import GPU, default_interconnect
from servelab.model.dtypes import storage_dtype
from servelab.model.quant import decode_family, get_quant, quant_name_for, synthesise_weights
from servelab.model.spec import ModelSpec
from servelab.plan.emit import shell_line
from servelab.ranges import count
from servelab.sizing import speed
from servelab.sizing.efficiency import DecodeEfficiency, decode_efficiency, uniform
from servelab.sizing.fit import EngineFit, PlanSettings
from servelab.sizing.kv import KVLayout, kv_layout
from servelab.sizing.parallel import TensorParallelCost, tensor_parallel_cost
from servelab.sizing.state import state_layout
from servelab.sizing.typed import MAX_CONTEXT, MAX_PARALLEL, given
from servelab.sizing.types import BatchPoint, DecodeCeilings, Plan, PlannedCard, PlanSet

BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
MAX_GPUS = 64  # one tensor-parallel group; engines support far fewer
UNIFIED_GPU_SHARE = 0.75  # Metal recommendedMaxWorkingSetSize on Apple silicon, by default


def planner_engine(name: str) -> Engine:
    """The engine ``name`` spells, if ``servelab plan`` has its allocation rules; ConfigError otherwise."""
    return registry.get_engine(name, registry.planned())


def _planner(engine: Engine) -> Planner:
    if engine.planner is None:
        raise ConfigError(f"servelab has no allocation rules for {engine.label}")
    return engine.planner


def engine_accepts(engine: Engine, model: ModelSpec) -> bool:
    """Whether ``engine`` loads weights stored like ``model`` (GGUF types, or safetensors formats)."""
    family = "gguf" if model.source == "gguf" else _family(model.quant)
    if family == "float":
        return True
    return (family == "gguf") == (_planner(engine).weight_formats == "gguf")


def _formats_line() -> str:
    """Which engines load which weights, for messages: "GGUF types on llamacpp; bf16, fp8, awq … on sglang, vllm"."""
    by_format: dict[str, list[Engine]] = {}
    for e in registry.planned():
        by_format.setdefault(_planner(e).weight_formats, []).append(e)
    parts = []
    for fmt, group in by_format.items():
        kinds = (
            "GGUF types"
            if fmt == "gguf"
            else f"{', '.join(_planner(group[0]).usual_quants)} / gptq / nvfp4 / mxfp4"
        )
        parts.append(f"{kinds} on {' or '.join(e.name for e in group)}")
    return "; ".join(parts)


def _family(quant: str) -> str:
    try:
        return get_quant(quant).family
    except ConfigError:
        return "gguf"


def with_quant(model: ModelSpec, quant: str | None) -> ModelSpec:
    """The model re-priced in `quant` (catalog/config models); file-read models keep their exact bytes."""
    if quant is None or quant.lower() == model.quant.lower():
        return model
    if model.weights_exact:
        raise ConfigError(
            f"{model.name} is stored as {model.quant} (read from a file); --quant {quant} cannot"
            " re-price it; drop --quant or plan the catalog id"
        )
    return synthesise_weights(model, quant)


def check_plan_numbers(context: int | None, parallel: int | None, gpus: int | None) -> None:
    """The planner's whole-number options in range (None: not given); the CLI calls it before any model read."""
    if context is not None:
        count(context, "--context", 1, MAX_CONTEXT, "tokens")
    if parallel is not None:
        count(parallel, "--parallel", 1, MAX_PARALLEL, "sequences")
    if gpus is not None:
        count(gpus, "--gpus", 1, MAX_GPUS, "(GPUs in one tensor-parallel group)")


SHARED_OPTIONS = frozenset(f.name for f in dataclasses.fields(PlanSettings)) - {"engine"}


def own_settings(engine: Engine, asked: object = None, flags: Mapping[str, object] | None = None) -> Any:
    """`engine`'s own Settings: `asked` (one of its Settings values; None: its defaults) with `flags` (its Settings
    fields by name) on top, validated by the Settings type itself; a name it does not have is one ConfigError."""
    kind = _planner(engine).settings_type
    base = kind() if asked is None else asked
    if not isinstance(base, kind):
        raise ConfigError(
            f"{engine.label} takes its own settings ({kind.__name__}), not {type(base).__name__}"
        )
    names = {f.name for f in dataclasses.fields(kind)}
    unknown = sorted(set(flags or {}) - names)
    if unknown:
        raise ConfigError(
            f"{engine.label} has no setting {', '.join(unknown)}; its settings: {', '.join(sorted(names)) or 'none'}"
        )
    return dataclasses.replace(base, **dict(flags or {})) if flags else base


def compute_dtype(model: ModelSpec, gpu: GPU) -> str:
    return "fp8" if model.quant.lower().startswith("fp8") and gpu.fp8_tflops else "bf16"


def sequence_state_bytes(model: ModelSpec, engine: Engine) -> int:
    conv, ssm = _planner(engine).state_dtypes
    return state_layout(model, conv_dtype=conv, ssm_dtype=ssm).bytes_per_sequence


def all_reduces(engine: Engine) -> bool:
    """Whether tensor parallelism splits each layer (an all-reduce per layer) rather than layer ranges."""
    return _planner(engine).tensor_parallel == "all-reduce"


@dataclasses.dataclass(frozen=True)
class _Speed:
    model: ModelSpec
    gpu: GPU
    engine: Engine
    kv_dtype: str
    tp: int
    interconnect: str | None

    @functools.cached_property
    def _layout(self) -> tuple[KVLayout, int, str]:
        """The KV layout, a sequence's state bytes and the compute dtype, once per plan (advise's grid asks
        for thousands of ceilings)."""
        kv = kv_layout(self.model, storage_dtype(self.kv_dtype, self.model.dtype))
        return kv, sequence_state_bytes(self.model, self.engine), compute_dtype(self.model, self.gpu)

    def _ceiling(self, context: int, batch: int) -> speed.DecodeCeiling:
        kv, state_bytes, dtype = self._layout
        return speed.decode_ceiling(
            self.model,
            self.gpu,
            kv,
            state_bytes=state_bytes,
            context=context,
            batch=batch,
            compute_dtype=dtype,
        )

    def _with_tp(self, step_s: float, batch: int) -> float:
        if self.tp > 1 and all_reduces(self.engine) and self.interconnect:
            return step_s / self.tp + self.cost(batch).per_token_s
        return step_s

    def per_sequence(self, context: int, batch: int = 1) -> tuple[float, str]:
        """Ceiling decode tok/s per sequence and which bound binds, TP all-reduces included."""
        d = self._ceiling(context, batch)
        return 1 / self._with_tp(1 / d.per_sequence_tok_s, batch), d.bound

    def efficiency(self, batch: int = 1) -> DecodeEfficiency:
        """The engine's figure for this model's weight format at `batch` (the CPU device: one figure)."""
        rules = _planner(self.engine)
        family = decode_family(self.model.quant)
        if self.gpu.is_cpu and rules.cpu_efficiency is not None:
            note = f"{self.engine.label} on the CPU device: {rules.cpu_efficiency[0]:.2f} (docs/planning.md)"
            return uniform(rules.cpu_efficiency[0], family, note)
        return decode_efficiency(rules.decode_efficiency, family, batch)

    def expected(self, context: int, batch: int = 1) -> float:
        """Expected decode tok/s per sequence: the ceiling's bytes at the engine's kernel efficiency."""
        d = self._ceiling(context, batch)
        return 1 / self._with_tp(speed.expected_step_s(d, self.gpu, self.efficiency(batch)), batch)

    def cost(self, batch: int = 1) -> TensorParallelCost:
        return tensor_parallel_cost(
            self.model, self.gpu, self.tp, self.interconnect or "pcie-p2p", batch=batch
        )


def _ceilings(sp: _Speed, short: int, full: int) -> DecodeCeilings:
    short_tok_s, bound = sp.per_sequence(short)
    full_tok_s, _ = sp.per_sequence(full)
    return DecodeCeilings(round(short_tok_s, 2), round(full_tok_s, 2), short, bound)


def _expected(sp: _Speed, c: DecodeCeilings, full: int) -> DecodeCeilings:
    short, at_full = sp.expected(c.short_context), sp.expected(full)
    return DecodeCeilings(round(short, 2), round(at_full, 2), c.short_context, c.bound)


def _batch_points(sp: _Speed, context: int, max_batch: int) -> tuple[BatchPoint, ...]:
    points = []
    for batch in (b for b in BATCHES if b <= max(1, max_batch)):
        per_seq, _ = sp.per_sequence(context, batch)
        expected = sp.expected(context, batch)
        point = BatchPoint(batch, context, round(per_seq * batch, 1), round(per_seq, 2))
        points.append(dataclasses.replace(point, expected_aggregate_tok_s=round(expected * batch, 1)))
    return tuple(points)


def _full_context_batch(fit: EngineFit, model: ModelSpec, served: int, tp: int) -> int:
    """How many sequences of `served` tokens the planned (per-GPU) KV cache holds at once (llama.cpp: its slots)."""
    if fit.slots and fit.full_context_batch is not None:
        return fit.full_context_batch
    per_sequence = kv_layout(model, storage_dtype(fit.kv_dtype, model.dtype), tp=tp).bytes_for(served)
    return max(1, min(fit.max_batch, fit.memory.kv_cache // max(1, per_sequence)))


def make_plan(
    model: ModelSpec,
    gpu: GPU,
    *,
    engine: str,
    quant: str | None = None,
    context: int | None = None,
    kv_dtype: str | None = None,
    parallel: int = 1,
    gpus: int = 1,
    interconnect: str | None = None,
    model_path: str | None = None,
    settings: object = None,
    **options: object,
) -> Plan:
    """Plan serving `model` with `engine` on `gpus` x `gpu` (tensor parallel when gpus > 1), exactly as asked.
    `settings`: the engine's own Settings (`Planner.settings_type`; None: its defaults); `options`: the other
    PlanSettings fields every engine shares (host, port, engine_version, speculative), and any of the engine's
    Settings fields by name on top of `settings`. `fits` only when the engine would start and serve `context`:
    any refusal of the engine's makes it false, its message first among the warnings."""
    chosen = planner_engine(engine)
    rules = _planner(chosen)
    if gpu.unified_memory and rules.needs_cuda:
        others = " or ".join(e.name for e in registry.planned() if not _planner(e).needs_cuda)
        raise ConfigError(f"{chosen.name} needs a CUDA or ROCm GPU; on {gpu.label} plan --engine {others}")
    if gpu.is_cpu and rules.cpu_efficiency is None:
        raise ConfigError(f"servelab does not plan {chosen.name} on a CPU; plan --engine {_cpu_engines()}")
    native = model
    if quant is not None or not model.weights_exact:
        quant = quant_name_for(quant or model.quant, rules.weight_formats)
    model = with_quant(model, quant)
    if model.weight_bytes <= 0 or model.total_params <= 0:
        raise ModelFormatError(
            f"{model.name} has no weights ({model.weight_bytes} bytes, {model.total_params} parameters); "
            "there is nothing to plan"
        )
    if not engine_accepts(chosen, model):
        raise ConfigError(f"{chosen.name} cannot load {model.quant} weights; {_formats_line()}")
    context = context if context is not None else model.max_context
    check_plan_numbers(context, parallel, gpus)
    if gpus > 1 and interconnect is None:
        interconnect = default_interconnect(gpu)
    shared = {k: v for k, v in options.items() if k in SHARED_OPTIONS}
    own = {k: v for k, v in options.items() if k not in SHARED_OPTIONS}
    asked = PlanSettings(
        context=context,
        engine=own_settings(chosen, settings, own),
        kv_dtype=kv_dtype,
        tp=gpus,
        parallel=parallel,
        model_path=model_path or model.name,
        **cast(dict[str, Any], shared),
    )
    fit: EngineFit = rules.plan(model, gpu, asked)
    sp = _Speed(model, gpu, chosen, fit.kv_dtype, gpus, interconnect)
    served = min(context, fit.context_served) if fit.context_served else context
    ceiling = _ceilings(sp, min(speed.SHORT_CONTEXT_TOKENS, served), served)
    refusals = tuple(r.message for r in fit.refusals)
    warnings = [*refusals, *fit.warnings]
    if gpu.unified_memory and fit.memory.total > UNIFIED_GPU_SHARE * gpu.memory_bytes:
        warnings.append(
            f"macOS lets the GPU wire about {UNIFIED_GPU_SHARE:.0%} of unified memory by default; this plan"
            " needs more (raise it with `sudo sysctl iogpu.wired_limit_mb=...`)"
        )
    if gpu.cpu is not None and 0 < speed.weight_read_bytes(model) <= gpu.cpu.llc_bytes:
        warnings.append(
            f"the weights read per token ({speed.weight_read_bytes(model) / 2**20:.1f} MiB) fit in the CPU's"
            f" {gpu.cpu.llc_bytes / 2**20:.0f} MiB last-level cache: decode reads them from cache, not memory,"
            " so measured speed can exceed this memory-bandwidth ceiling"
        )
    decode = sp.efficiency()
    prefill = rules.cpu_efficiency[1] if gpu.is_cpu and rules.cpu_efficiency else rules.prefill_efficiency
    efficiency = {"decode": decode.weights, "decode_kv": decode.kv, "prefill": prefill}
    single = None
    if gpus > 1:
        single = round(_Speed(model, gpu, chosen, fit.kv_dtype, 1, None).per_sequence(served)[0], 2)
        if ceiling.full_context < single:
            warnings.append(
                f"tensor parallel over {interconnect}: {ceiling.full_context} tok/s ceiling is below one"
                f" GPU's {single} tok/s; the all-reduce latency outweighs the split"
            )
    return Plan(
        engine=chosen.name,
        quant=model.quant,
        context=context,
        kv_dtype=fit.kv_dtype,
        fits=fit.fits and not fit.refusals,
        memory_bytes=fit.memory,
        decode_ceiling_tok_s=ceiling,
        decode_expected_tok_s=_expected(sp, ceiling, served),
        prefill_ceiling_tok_s=round(
            speed.prefill_ceiling_tok_s(
                model, gpu, served, compute_dtype=compute_dtype(model, gpu), gpus=gpus
            ),
            1,
        ),
        tensor_parallel=gpus,
        native_quant=is_native(native, model.quant),
        model=model.name,
        gpu=gpu.name,
        slots=fit.slots,
        context_served=fit.context_served,
        efficiency=efficiency,
        efficiency_source=decode.note,
        prefill_short_tok_s=round(
            speed.prefill_ceiling_tok_s(
                model, gpu, ceiling.short_context, compute_dtype=compute_dtype(model, gpu), gpus=gpus
            ),
            1,
        ),
        prefill_bound=speed.prefill_bound(
            model,
            gpu,
            served,
            chunk_tokens=rules.prefill_chunk_tokens,
            compute_dtype=compute_dtype(model, gpu),
        ),
        decode_batch_tok_s=_batch_points(sp, min(speed.SHORT_CONTEXT_TOKENS, served), fit.max_batch),
        decode_batch_full_context_tok_s=_batch_points(
            sp, served, _full_context_batch(fit, model, served, gpus)
        ),
        parallel_cost=sp.cost() if gpus > 1 and all_reduces(chosen) else None,
        single_gpu_decode_tok_s=single,
        details={
            **fit.figures.to_json(),
            **({"engine_version": asked.engine_version} if asked.engine_version else {}),
            **_speculative_details(asked),
        },
        command=tuple(fit.argv),
        command_line=shell_line(fit.argv),
        warnings=tuple(warnings),
        card=PlannedCard(gpu.memory_mib, gpu.bandwidth_gb_s, gpu.bf16_tflops),
        device_note=gpu.source if gpu.is_cpu else "",
        refusals=refusals,
        remedy={k: v for r in fit.refusals for k, v in r.fix.items()},
    )


def _speculative_details(asked: PlanSettings[Any]) -> dict[str, object]:
    """What `predict --plan` needs of the plan's speculative decoding: its method and tokens drafted per step."""
    spec = asked.speculative
    return {} if spec is None else {"speculative_method": spec.method, "speculative_tokens": spec.num_tokens}


def _cpu_engines() -> str:
    return " or ".join(e.name for e in registry.planned() if _planner(e).cpu_efficiency)


REPAIR_ROUNDS = 3  # a fix may uncover the next refusal (vLLM: the Mamba blocks after the batched tokens)


def search_plan(
    model: ModelSpec,
    gpu: GPU,
    *,
    engine: str,
    quant: str | None = None,
    kv_dtype: str | None = None,
    **kwargs: Any,
) -> Plan:
    """The best fitting variant of one (engine, quant): the asked settings; where the engine would refuse, with
    the fixes its refusals name (vLLM --max-num-seqs N, sglang --max-mamba-cache-size N), never overriding a
    setting the caller gave; without `kv_dtype`, each KV dtype the engine supports, its preferred first. The
    first variant that fits wins, its changes listed in `searched` and, as the engine's flags the launch with its
    defaults lacks, in `fits_with`; none fits: the plan as asked. `plan` without --engine/--quant searches;
    `plan_as_asked` answers for one launch."""
    dtypes: tuple[str | None, ...] = (kv_dtype,)
    own = kwargs.get("settings")
    chosen = given(own) if own is not None else {}  # the engine's own settings the caller gave
    if kv_dtype is None:
        dtypes = _planner(planner_engine(engine)).kv_dtypes or (None,)
    plans = [make_plan(model, gpu, engine=engine, quant=quant, kv_dtype=d, **kwargs) for d in dtypes]
    asked = plans[0].command
    for dtype, plan in zip(dtypes, plans, strict=True):  # a smaller KV dtype before any engine knob
        if plan.fits:
            return _searched(plan, dtype != dtypes[0], kwargs, kwargs, asked)
    for dtype, plan in zip(dtypes, plans, strict=True):
        flags = dict(kwargs)
        for _ in range(REPAIR_ROUNDS):
            fix = {k: v for k, v in plan.remedy.items() if kwargs.get(k) is None and k not in chosen}
            if plan.fits or not fix or fix.items() <= flags.items():
                break
            flags.update(fix)
            plan = make_plan(model, gpu, engine=engine, quant=quant, kv_dtype=dtype, **flags)
        if plan.fits:
            return _searched(plan, dtype != dtypes[0], flags, kwargs, asked)
    return plans[0]


def plan_as_asked(
    model: ModelSpec,
    gpu: GPU,
    *,
    engine: str,
    quant: str | None = None,
    kv_dtype: str | None = None,
    **kwargs: Any,
) -> Plan:
    """The launch exactly as asked (the engine's defaults for what is not given; `make_plan`), its `fits` the
    answer to "will this launch fit?". When it does not, `fits_with` offers the smallest change the search finds
    (`search_plan`: a KV dtype the engine prefers before any knob a refusal names), as the flags to add in the
    engine's own spelling; the plan's figures and command stay those of the launch as asked."""
    plan = make_plan(model, gpu, engine=engine, quant=quant, kv_dtype=kv_dtype, **kwargs)
    if plan.fits:
        return plan
    found = search_plan(model, gpu, engine=engine, quant=quant, kv_dtype=kv_dtype, **kwargs)
    if not found.fits:
        return plan
    return dataclasses.replace(plan, fits_with=added_flags(plan.command, found.command))


def _searched(
    plan: Plan, new_dtype: bool, flags: dict[str, Any], asked: dict[str, Any], asked_command: tuple[str, ...]
) -> Plan:
    """The plan with what the search changed from the asked settings, as `setting=value` words, and as the
    flags its command adds to the asked one's."""
    words = [f"kv_dtype={plan.kv_dtype}"] if new_dtype else []
    words += [f"{k}={v}" for k, v in flags.items() if asked.get(k) != v]
    return dataclasses.replace(
        plan, searched=tuple(words), fits_with=added_flags(asked_command, plan.command)
    )


def _items(argv: tuple[str, ...]) -> list[tuple[str, ...]]:
    """A command's options, each a flag with the values that follow it (the program and its positionals before
    the first flag are no option)."""
    items: list[tuple[str, ...]] = []
    for word in argv:
        if word.startswith("-") and len(word) > 1 and not _is_number(word):
            items.append((word,))
        elif items:
            items[-1] += (word,)
    return items


def _is_number(word: str) -> bool:
    try:
        float(word)
    except ValueError:
        return False
    return True


def added_flags(asked: tuple[str, ...], changed: tuple[str, ...]) -> tuple[str, ...]:
    """The options of `changed` (flag and values) that `asked` lacks or gives another value, in `changed`'s order:
    what to add to the asked command. Both commands are the engine's own writer's (`EngineFit.argv`), so the
    words are the engine's spelling and no engine flag is named here."""
    have = set(_items(asked))
    return tuple(word for item in _items(changed) if item not in have for word in item)


def is_native(model: ModelSpec, quant: str) -> bool:
    """Whether `quant` is the checkpoint's own quantization (its quantization_config, or the GGUF file's types)
    in any engine's spelling; a 16-bit checkpoint has none (re-quantising it is the usual choice)."""
    if _family(model.quant) == "float":
        return False
    return quant_name_for(quant, "hf").lower() == quant_name_for(model.quant, "hf").lower()


def candidates(
    model: ModelSpec, engines: tuple[Engine, ...], quant: str | None
) -> list[tuple[str, str | None]]:
    """Sensible (engine, quant) pairs: the model's own format, then the usual choices per engine."""
    pairs: list[tuple[str, str | None]] = []
    for engine in engines:
        formats = _planner(engine).weight_formats
        if model.weights_exact or quant is not None:
            options: tuple[str | None, ...] = (quant and quant_name_for(quant, formats),)
        else:
            own = quant_name_for(model.quant, formats)
            options = tuple(dict.fromkeys((own, *_planner(engine).usual_quants)))
        for option in options:
            priced = with_quant(model, option)
            if engine_accepts(engine, priced):
                pairs.append((engine.name, option))
    return pairs


def compare_plans(
    model: ModelSpec,
    gpu: GPU,
    *,
    engines: tuple[str, ...] | None = None,
    quant: str | None = None,
    gpus: int = 1,
    interconnect: str | None = None,
    engine_settings: Mapping[str, object] | None = None,
    **kwargs: Any,
) -> PlanSet:
    """Every sensible (engine, quant) plan, each its best fitting variant (`search_plan`: KV dtypes when none is
    asked, the engine's fixes for its refusals); fitting plans first, the checkpoint's own quantization first among
    them (MXFP4 for gpt-oss), then the fastest full-context decode.
    ``engines``: names to compare (default: every engine servelab can plan); ``engine_settings``: each engine's own
    Settings by name (the others: their defaults)."""
    chosen = registry.planned() if engines is None else tuple(planner_engine(e) for e in engines)
    if gpu.unified_memory:
        chosen = tuple(e for e in chosen if not _planner(e).needs_cuda) or tuple(
            e for e in registry.planned() if not _planner(e).needs_cuda
        )
    if gpu.is_cpu:
        chosen = tuple(e for e in chosen if _planner(e).cpu_efficiency)
        if not chosen:
            raise ConfigError(
                f"servelab does not plan {', '.join(engines or ())} on a CPU; plan --engine {_cpu_engines()}"
            )
    pairs = candidates(model, chosen, quant)
    if not pairs:
        names = ", ".join(e.name for e in chosen)
        raise ConfigError(f"no engine among {names} can load {quant or model.quant} weights")
    plans = [
        search_plan(
            model,
            gpu,
            engine=e,
            quant=q,
            gpus=gpus,
            interconnect=interconnect,
            settings=(engine_settings or {}).get(e),
            **kwargs,
        )
        for e, q in pairs
    ]
    plans.sort(key=lambda p: (not p.fits, not p.native_quant, -p.decode_expected_tok_s.full_context))
    link = interconnect if gpus > 1 else None
    if gpus > 1 and link is None:
        link = default_interconnect(gpu)
    return PlanSet(model.name, gpu.name, gpus, link, tuple(plans), search=True)


def plan_set(plan: Plan, gpus: int = 1, interconnect: str | None = None) -> PlanSet:
    return PlanSet(plan.model, plan.gpu, gpus, interconnect if gpus > 1 else None, (plan,))

"""`make_plan`: one engine, one quantization, one context on one GPU type; `compare_plans`: every sensible
(engine, quant) candidate side by side. Pure: a ModelSpec and a GPU in, frozen dataclasses out."""

from __future__ import annotations

import dataclasses

from servelab.errors import ConfigError
from servelab.hardware.gpus import GPU, default_interconnect
from servelab.model.dtypes import storage_dtype
from servelab.model.quant import get_quant, synthesise_weights
from servelab.model.spec import ModelSpec
from servelab.plan import speed
from servelab.plan.engine_plans import ADAPTERS, ENGINES, EngineFit, PlanSettings
from servelab.plan.kv import kv_layout
from servelab.plan.launch import shell_line
from servelab.plan.parallel import TensorParallelCost, tensor_parallel_cost
from servelab.plan.state import state_layout
from servelab.plan.types import BatchPoint, DecodeCeilings, Plan, PlanSet

HF_QUANTS = ("bf16", "fp8", "awq")
GGUF_QUANTS = ("Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M", "IQ4_XS")
BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
PREFILL_CHUNK = {"llamacpp": 512, "sglang": 4096, "vllm": 2048}  # n_ubatch / chunked prefill / batched tokens
UNIFIED_GPU_SHARE = 0.75  # Metal recommendedMaxWorkingSetSize on Apple silicon, by default


def _engine(name: str) -> str:
    key = name.lower().replace(".", "").replace("-", "").replace("_", "")
    if key not in ENGINES:
        raise ConfigError(f"unknown engine {name!r}; choose one of: {', '.join(ENGINES)}, all")
    return key


def engine_accepts(engine: str, model: ModelSpec) -> bool:
    """Whether `engine` can load weights stored like `model` (GGUF types: llama.cpp; HF formats: sglang/vLLM)."""
    family = "gguf" if model.source == "gguf" else _family(model.quant)
    if family == "float":
        return True
    return (family == "gguf") == (engine == "llamacpp")


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


def _check(context: int, parallel: int, gpus: int) -> None:
    if context <= 0:
        raise ConfigError(f"--context must be a positive number of tokens, got {context}")
    if parallel < 1:
        raise ConfigError(f"--parallel must be at least 1, got {parallel}")
    if gpus < 1:
        raise ConfigError(f"--gpus must be at least 1, got {gpus}")


def _compute_dtype(model: ModelSpec, gpu: GPU) -> str:
    return "fp8" if model.quant.lower().startswith("fp8") and gpu.fp8_tflops else "bf16"


def _state_bytes(model: ModelSpec, engine: str) -> int:
    if engine == "llamacpp":
        return state_layout(model, conv_dtype="fp32", ssm_dtype="fp32").bytes_per_sequence
    return state_layout(model).bytes_per_sequence


@dataclasses.dataclass(frozen=True)
class _Speed:
    model: ModelSpec
    gpu: GPU
    engine: str
    kv_dtype: str
    tp: int
    interconnect: str | None

    def per_sequence(self, context: int, batch: int = 1) -> tuple[float, str]:
        """Ceiling decode tok/s per sequence and which bound binds, TP all-reduces included."""
        kv = kv_layout(self.model, storage_dtype(self.kv_dtype, self.model.dtype))
        d = speed.decode_ceiling(
            self.model,
            self.gpu,
            kv,
            state_bytes=_state_bytes(self.model, self.engine),
            context=context,
            batch=batch,
            compute_dtype=_compute_dtype(self.model, self.gpu),
        )
        step_s = 1 / d.per_sequence_tok_s
        if self.tp > 1 and self.engine != "llamacpp" and self.interconnect:
            step_s = step_s / self.tp + self.cost(batch).per_token_s
        return 1 / step_s, d.bound

    def cost(self, batch: int = 1) -> TensorParallelCost:
        return tensor_parallel_cost(
            self.model, self.gpu, self.tp, self.interconnect or "pcie-p2p", batch=batch
        )


def _ceilings(sp: _Speed, short: int, full: int) -> DecodeCeilings:
    short_tok_s, bound = sp.per_sequence(short)
    full_tok_s, _ = sp.per_sequence(full)
    return DecodeCeilings(round(short_tok_s, 2), round(full_tok_s, 2), short, bound)


def _scaled(c: DecodeCeilings, factor: float) -> DecodeCeilings:
    return DecodeCeilings(
        round(c.short * factor, 2), round(c.full_context * factor, 2), c.short_context, c.bound
    )


def _batch_points(sp: _Speed, context: int, max_batch: int) -> tuple[BatchPoint, ...]:
    points = []
    for batch in (b for b in BATCHES if b <= max(1, max_batch)):
        per_seq, _ = sp.per_sequence(context, batch)
        points.append(BatchPoint(batch, context, round(per_seq * batch, 1), round(per_seq, 2)))
    return tuple(points)


def _full_context_batch(fit: EngineFit, model: ModelSpec, served: int) -> int:
    """How many sequences of `served` tokens the planned KV cache holds at once (llama.cpp: its slots)."""
    if fit.slots and "n_ctx_per_slot" in fit.details:
        return fit.slots
    per_sequence = kv_layout(model, storage_dtype(fit.kv_dtype, model.dtype)).bytes_for(served)
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
    **engine_flags: object,
) -> Plan:
    """Plan serving `model` with `engine` on `gpus` x `gpu` (tensor parallel when gpus > 1). `engine_flags`:
    mem_fraction_static, gpu_memory_utilization, max_total_tokens, n_gpu_layers, host, port."""
    engine = _engine(engine)
    if gpu.unified_memory and engine != "llamacpp":
        raise ConfigError(f"{engine} needs a CUDA or ROCm GPU; on {gpu.label} plan --engine llamacpp")
    model = with_quant(model, quant)
    if not engine_accepts(engine, model):
        raise ConfigError(
            f"{engine} cannot load {model.quant} weights; GGUF types run on llamacpp, "
            f"{', '.join(HF_QUANTS)} / gptq / nvfp4 / mxfp4 on sglang or vllm"
        )
    context = context if context is not None else model.max_context
    _check(context, parallel, gpus)
    if gpus > 1 and interconnect is None:
        interconnect = default_interconnect(gpu)
    settings = PlanSettings(
        context=context,
        kv_dtype=kv_dtype,
        tp=gpus,
        parallel=parallel,
        model_path=model_path or model.name,
        **engine_flags,
    )  # type: ignore[arg-type]
    fit: EngineFit = ADAPTERS[engine](model, gpu, settings)
    sp = _Speed(model, gpu, engine, fit.kv_dtype, gpus, interconnect)
    served = min(context, fit.context_served) if fit.context_served else context
    ceiling = _ceilings(sp, min(speed.SHORT_CONTEXT_TOKENS, served), served)
    warnings = list(fit.warnings)
    if gpu.unified_memory and fit.memory.total > UNIFIED_GPU_SHARE * gpu.memory_bytes:
        warnings.append(
            f"macOS lets the GPU wire about {UNIFIED_GPU_SHARE:.0%} of unified memory by default; this plan"
            " needs more (raise it with `sudo sysctl iogpu.wired_limit_mb=...`)"
        )
    single = None
    if gpus > 1:
        single = round(_Speed(model, gpu, engine, fit.kv_dtype, 1, None).per_sequence(served)[0], 2)
        if ceiling.full_context < single:
            warnings.append(
                f"tensor parallel over {interconnect}: {ceiling.full_context} tok/s ceiling is below one"
                f" GPU's {single} tok/s; the all-reduce latency outweighs the split"
            )
    return Plan(
        engine=engine,
        quant=model.quant,
        context=context,
        kv_dtype=fit.kv_dtype,
        fits=fit.fits,
        memory_bytes=fit.memory,
        decode_ceiling_tok_s=ceiling,
        decode_expected_tok_s=_scaled(ceiling, speed.DECODE_EFFICIENCY[engine]),
        prefill_ceiling_tok_s=round(
            speed.prefill_ceiling_tok_s(
                model, gpu, served, compute_dtype=_compute_dtype(model, gpu), gpus=gpus
            ),
            1,
        ),
        tensor_parallel=gpus,
        model=model.name,
        gpu=gpu.name,
        slots=fit.slots,
        context_served=fit.context_served,
        efficiency={"decode": speed.DECODE_EFFICIENCY[engine], "prefill": speed.PREFILL_EFFICIENCY[engine]},
        prefill_short_tok_s=round(
            speed.prefill_ceiling_tok_s(
                model, gpu, ceiling.short_context, compute_dtype=_compute_dtype(model, gpu), gpus=gpus
            ),
            1,
        ),
        prefill_bound=speed.prefill_bound(
            model, gpu, served, chunk_tokens=PREFILL_CHUNK[engine], compute_dtype=_compute_dtype(model, gpu)
        ),
        decode_batch_tok_s=_batch_points(sp, min(speed.SHORT_CONTEXT_TOKENS, served), fit.max_batch),
        decode_batch_full_context_tok_s=_batch_points(sp, served, _full_context_batch(fit, model, served)),
        parallel_cost=sp.cost() if gpus > 1 and engine != "llamacpp" else None,
        single_gpu_decode_tok_s=single,
        details=fit.details,
        command=tuple(fit.argv),
        command_line=shell_line(fit.argv),
        warnings=tuple(warnings),
    )


def candidates(model: ModelSpec, engines: tuple[str, ...], quant: str | None) -> list[tuple[str, str | None]]:
    """Sensible (engine, quant) pairs: the model's own format, then the usual choices per engine."""
    pairs: list[tuple[str, str | None]] = []
    for engine in engines:
        if model.weights_exact or quant is not None:
            options: tuple[str | None, ...] = (quant,)
        else:
            usual = GGUF_QUANTS if engine == "llamacpp" else HF_QUANTS
            options = tuple(dict.fromkeys((model.quant, *usual)))
        for option in options:
            priced = with_quant(model, option)
            if engine_accepts(engine, priced):
                pairs.append((engine, option))
    return pairs


def compare_plans(
    model: ModelSpec,
    gpu: GPU,
    *,
    engines: tuple[str, ...] = ENGINES,
    quant: str | None = None,
    gpus: int = 1,
    interconnect: str | None = None,
    **kwargs: object,
) -> PlanSet:
    """Every sensible (engine, quant) plan; fitting plans first, fastest full-context decode first."""
    engines = tuple(_engine(e) for e in engines)
    if gpu.unified_memory:
        engines = tuple(e for e in engines if e == "llamacpp") or ("llamacpp",)
    pairs = candidates(model, engines, quant)
    if not pairs:
        raise ConfigError(f"no engine among {', '.join(engines)} can load {quant or model.quant} weights")
    plans = [
        make_plan(model, gpu, engine=e, quant=q, gpus=gpus, interconnect=interconnect, **kwargs)  # type: ignore[arg-type]
        for e, q in pairs
    ]
    plans.sort(key=lambda p: (not p.fits, -p.decode_expected_tok_s.full_context))
    chosen = interconnect if gpus > 1 else None
    if gpus > 1 and chosen is None:
        chosen = default_interconnect(gpu)
    return PlanSet(model.name, gpu.name, gpus, chosen, tuple(plans))


def plan_set(plan: Plan, gpus: int = 1, interconnect: str | None = None) -> PlanSet:
    return PlanSet(plan.model, plan.gpu, gpus, interconnect if gpus > 1 else None, (plan,))

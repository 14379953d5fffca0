"""llama.cpp's planner adapter: its memory rules (memory.py) for one request, as an EngineFit with its launch
words; when the model does not fit, how many layers -ngl can keep on the GPU. Reached through the registry's
Planner (engine.py).
"""

from __future__ import annotations

from servelab.engines.llamacpp import cmdline, cpu_planner
from servelab.engines.llamacpp.builds import (
    fa_mask_keeps_f32,
    output_layer_first,
    parse_build,
    reserved_outputs,
)
from servelab.engines.llamacpp.memory import (
    DEFAULT_N_BATCH,
    LlamaCppMemory,
    engine_kv_dtype,
    flash_attn_on,
    gpu_layers,
    llamacpp_memory,
)
from servelab.engines.llamacpp.settings import LlamaCppFigures, LlamaCppSettings
from servelab.errors import ConfigError
from servelab.hardware.gpus import GPU
from servelab.model.spec import ModelSpec
from servelab.sizing.fit import EngineFit, PlanSettings, Refusal, memory_bytes

LlamaCppPlanSettings = PlanSettings[LlamaCppSettings]

FIT_TARGET_BYTES = 1024**3  # llama.cpp --fit keeps 1024 MiB free per device


def _max_gpu_layers(model: ModelSpec, gpu: GPU, flags: dict[str, object]) -> int:
    """The most layers -ngl can put on the GPU within its memory (0 when not even one fits)."""
    budget = gpu.memory_bytes - gpu.runtime_context_bytes
    low, high = 0, model.num_layers + 1
    while low < high:
        mid = (low + high + 1) // 2
        if llamacpp_memory(model, n_gpu_layers=mid, **flags).gpu_bytes <= budget:  # type: ignore[arg-type]
            low = mid
        else:
            high = mid - 1
    return low


def _min_cpu_moe(model: ModelSpec, gpu: GPU, flags: dict[str, object]) -> int | None:
    """The fewest --n-cpu-moe layers whose experts must leave the GPU for the rest to fit (None: not enough)."""
    budget = gpu.memory_bytes - gpu.runtime_context_bytes

    def fits(n: int) -> bool:
        return llamacpp_memory(model, **{**flags, "n_cpu_moe": n}).gpu_bytes <= budget  # type: ignore[arg-type]

    if model.moe is None or not fits(model.num_layers):
        return None
    low, high = 0, model.num_layers
    while low < high:
        mid = (low + high) // 2
        if fits(mid):
            high = mid
        else:
            low = mid + 1
    return low


def _flags(model: ModelSpec, s: LlamaCppPlanSettings, cache_k: str, cache_v: str) -> dict[str, object]:
    """llamacpp_memory's keywords for these settings (-c, -np, -kvu, -ctk/-ctv, -fa, -b, -ub, --n-cpu-moe, the
    GPUs -sm layer splits over, the outputs and the mask the build reserves its graph with, how it reads -ngl)."""
    build = parse_build(s.engine_version)
    flags: dict[str, object] = {
        "n_ctx": s.context if s.engine.kv_unified else s.context * s.parallel,
        "n_parallel": s.parallel,
        "kv_unified": s.engine.kv_unified,
        "cache_type_k": cache_k,
        "cache_type_v": cache_v,
        "flash_attn": flash_attn_on(s.engine.flash_attn),
        "n_cpu_moe": model.num_layers if s.engine.cpu_moe else (s.engine.n_cpu_moe or 0),
        "n_devices": s.tp,
        "n_outputs_max": reserved_outputs(build, s.engine.n_batch or DEFAULT_N_BATCH),
        "fa_mask_f32": fa_mask_keeps_f32(build),
        "output_first": output_layer_first(build),
    }
    flags.update(
        {k: v for k, v in (("n_batch", s.engine.n_batch), ("n_ubatch", s.engine.n_ubatch)) if v is not None}
    )
    return flags


def _refusals(
    model: ModelSpec, gpu: GPU, s: LlamaCppPlanSettings, flags: dict[str, object], total: int, slot: int
) -> list[Refusal]:
    """What llama-server cannot do with these flags: allocate its GPU buffers (ggml_backend_cuda_buffer_type_alloc_buffer:
    "failed to allocate CUDA buffer" / "failed to load model"), or serve the asked context (each slot capped at
    n_ctx_train, tools/server: "the slot context ... exceeds the training context of the model")."""
    out = []
    if total > gpu.memory_bytes:
        layers = _max_gpu_layers(model, gpu, flags)
        repeating, _ = gpu_layers(layers, model.num_layers, output_first=bool(flags["output_first"]))
        hint = (
            f"-ngl {layers} (keeps {model.num_layers - repeating} of {model.num_layers} layers in host RAM)"
        )
        experts = _min_cpu_moe(model, gpu, flags) if not s.engine.cpu_moe else None
        if experts is not None:
            hint = f"--n-cpu-moe {experts} (the experts of {experts} layers in host RAM), or " + hint
        out.append(
            Refusal(
                f"llama.cpp: failed to allocate its CUDA buffers: {total / 2**30:.2f} GiB needed on a"
                f" {gpu.memory_bytes / 2**30:.2f} GiB card; pass {hint}, a smaller --quant or a shorter -c"
            )
        )
    if slot < s.context:
        out.append(
            Refusal(
                f"llama.cpp: each slot is capped at the model's training context ({slot} tokens), below the"
                f" asked {s.context}: pass -c {slot * (1 if s.engine.kv_unified else s.parallel)}"
            )
        )
    return out


def _draft_memory(s: LlamaCppPlanSettings, n_ctx: int) -> LlamaCppMemory | None:
    """The draft model's buffers (-md): common_base_params_to_speculative gives its context the target's n_ctx and
    slots, its KV the -ctkd/-ctvd types (f16 by default), all layers on the GPU (-ngld defaults to all)."""
    spec = s.speculative
    if spec is None:
        return None
    if spec.method != "draft" or spec.draft is None:
        raise ConfigError(
            f"servelab plans llama.cpp speculative decoding with a draft model (-md FILE --spec-draft-n-max N),"
            f" not {spec.method}; pass --speculative draft:N --draft-model FILE"
        )
    return llamacpp_memory(
        spec.draft,
        n_ctx=n_ctx,
        n_parallel=s.parallel,
        kv_unified=s.engine.kv_unified,
        n_outputs_max=reserved_outputs(parse_build(s.engine_version), DEFAULT_N_BATCH),
        fa_mask_f32=fa_mask_keeps_f32(parse_build(s.engine_version)),
    )


def _quantized_v_refusal(flags: dict[str, object]) -> list[Refusal]:
    """llama_context refuses a quantized V cache without flash attention ("quantized V cache was requested, but
    this requires Flash Attention", src/llama-context.cpp)."""
    cache_v = str(flags["cache_type_v"])
    if flags["flash_attn"] or not cache_v.startswith(("q", "iq")):
        return []
    return [
        Refusal(
            f"llama.cpp: -ctv {cache_v} without flash attention is refused ('quantized V cache was requested,"
            " but this requires Flash Attention'): pass -fa on or -ctv f16",
            {"flash_attn": "on"},
        )
    ]


def _auto_note(model: ModelSpec, s: LlamaCppPlanSettings, flags: dict[str, object]) -> str | None:
    """With -fa auto, what the compute buffer becomes if the backend resolves flash attention off."""
    if (s.engine.flash_attn or "").lower() != "auto" or str(flags["cache_type_v"]).startswith(("q", "iq")):
        return None
    off = llamacpp_memory(model, n_gpu_layers=s.engine.n_gpu_layers, **{**flags, "flash_attn": False})  # type: ignore[arg-type]
    return (
        "llama.cpp: -fa auto planned as on (CUDA, Metal and CPU run flash attention); where a backend resolves"
        f" it off the compute buffer grows to {off.compute_bytes / 2**30:.2f} GiB per device (f32 attention"
        " scores over the slot's context): pass -fa on to be sure"
    )


def plan(model: ModelSpec, gpu: GPU, s: LlamaCppPlanSettings) -> EngineFit:
    if gpu.is_cpu:
        return cpu_planner.plan(model, gpu, s)
    cache_type, note = engine_kv_dtype(s.kv_dtype)
    cache_v, note_v = engine_kv_dtype(s.engine.kv_dtype_v) if s.engine.kv_dtype_v else (cache_type, None)
    flags = _flags(model, s, cache_type, cache_v)
    v_refusal = _quantized_v_refusal(flags)
    if v_refusal:  # the figures as with -fa on; the launch itself is refused
        flags["flash_attn"] = True
    m = llamacpp_memory(model, n_gpu_layers=s.engine.n_gpu_layers, **flags)  # type: ignore[arg-type]
    d = _draft_memory(s, m.n_ctx)
    runtime, tp = gpu.runtime_context_bytes, s.tp  # -sm layer: each GPU holds 1/tp of the layers
    memory = memory_bytes(
        gpu,
        m.model_gpu_bytes // tp,
        0,
        d.model_gpu_bytes if d else 0,
        (m.kv_gpu_bytes + (d.kv_gpu_bytes if d else 0)) // tp,
        (m.recurrent_gpu_bytes + (d.recurrent_gpu_bytes if d else 0)) // tp,
        (m.compute_bytes if m.compute_on_gpu else 0) + (d.compute_bytes if d else 0),
        runtime,
        m.host_bytes + (d.host_bytes if d else 0),
    )
    warnings = [w for w in (note, note_v, *m.warnings, _auto_note(model, s, flags)) if w]
    if tp > 1:
        warnings.append(
            f"llama.cpp splits layers across the {tp} GPUs (a pipeline): memory per GPU drops,"
            " single-stream decode does not get faster"
        )
    refusals = [*v_refusal, *_refusals(model, gpu, s, flags, memory.total, m.n_ctx_per_slot)]
    if m.n_gpu_layers < model.num_layers:
        warnings.append(
            f"llama.cpp: -ngl {s.engine.n_gpu_layers} keeps {model.num_layers - m.n_gpu_layers} of"
            f" {model.num_layers} layers in host RAM (decode then runs at host-memory speed)"
        )
    if m.experts_host_bytes:
        warnings.append(
            f"llama.cpp: {m.experts_host_bytes / 2**30:.2f} GiB of routed experts stay in host RAM: each token"
            " reads its active experts there (decode then runs nearer host-memory speed than the GPU ceiling)"
        )
    if not refusals and gpu.memory_bytes - memory.total < FIT_TARGET_BYTES:
        warnings.append(
            "llama.cpp: less than 1024 MiB would stay free; --fit (on by default) may lower -ngl or"
            " -c for unset flags"
        )
    argv = cmdline.plan_command(
        model, s, n_ctx=m.n_ctx, cache_type_k=cache_type, cache_type_v=cache_v, on_gpu=True
    )
    figures = LlamaCppFigures(
        n_ctx=m.n_ctx,
        n_ctx_per_slot=m.n_ctx_per_slot,
        n_parallel=m.n_parallel,
        kv_unified=m.kv_unified,
        n_gpu_layers=m.n_gpu_layers,
        compute_buffer_bytes=m.compute_bytes,
        output_buffer_bytes=m.output_bytes,
        kv_cells=m.kv_cells,
        flash_attn=m.flash_attn,
        cache_type_v=cache_v,
        n_batch=s.engine.n_batch or 2048,
        n_ubatch=s.engine.n_ubatch or 512,
        experts_host_bytes=m.experts_host_bytes,
        model_bytes=m.model_bytes,
        kv_bytes=m.kv_bytes,
        recurrent_bytes=m.recurrent_bytes,
    )
    return EngineFit(
        memory=memory,
        fits=not refusals,
        context_served=m.n_ctx_per_slot,
        slots=m.n_parallel,
        kv_dtype=cache_type,
        figures=figures,
        argv=argv,
        warnings=warnings,
        max_batch=m.n_parallel,
        refusals=tuple(refusals),
        full_context_batch=m.n_parallel,
    )

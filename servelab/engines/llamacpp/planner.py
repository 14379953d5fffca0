"""llama.cpp's planner adapter: its memory rules (memory.py) for one request, as an EngineFit with its launch
words; when the model does not fit, how many layers -ngl can keep on the GPU. Reached through the registry's
Planner (engine.py).
"""

from __future__ import annotations

from servelab.engines.llamacpp import DEFAULT_PORT, cmdline, cpu_planner
from servelab.engines.llamacpp.memory import engine_kv_dtype, llamacpp_memory
from servelab.hardware.gpus import GPU
from servelab.model.spec import ModelSpec
from servelab.plan.fit import EngineFit, PlanSettings, memory_bytes

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


def plan(model: ModelSpec, gpu: GPU, s: PlanSettings) -> EngineFit:
    if gpu.is_cpu:
        return cpu_planner.plan(model, gpu, s)
    cache_type, note = engine_kv_dtype(s.kv_dtype)
    n_ctx = s.context if s.kv_unified else s.context * s.parallel
    flags: dict[str, object] = {
        "n_ctx": n_ctx,
        "n_parallel": s.parallel,
        "kv_unified": s.kv_unified,
        "cache_type_k": cache_type,
        "cache_type_v": cache_type,
        "flash_attn": True,
    }
    m = llamacpp_memory(model, n_gpu_layers=s.n_gpu_layers, **flags)  # type: ignore[arg-type]
    runtime, tp = gpu.runtime_context_bytes, s.tp  # -sm layer: each GPU holds 1/tp of the layers
    memory = memory_bytes(
        gpu,
        m.model_gpu_bytes // tp,
        0,
        0,
        m.kv_gpu_bytes // tp,
        m.recurrent_gpu_bytes // tp,
        m.compute_bytes if m.n_gpu_layers else 0,
        runtime,
        m.host_bytes,
    )
    warnings = [w for w in (note, *m.warnings) if w]
    if tp > 1:
        warnings.append(
            f"llama.cpp splits layers across the {tp} GPUs (a pipeline): memory per GPU drops,"
            " single-stream decode does not get faster"
        )
    fits = memory.total <= gpu.memory_bytes
    if fits and m.n_ctx_per_slot < s.context:
        fits = False  # the slot window is capped at n_ctx_train
    elif not fits:
        layers = _max_gpu_layers(model, gpu, flags)
        warnings.append(
            f"llama.cpp: does not fit on the GPU; -ngl {layers} keeps {model.num_layers - layers} of"
            f" {model.num_layers} layers in host RAM (decode then runs at host-memory speed)"
        )
    elif m.n_gpu_layers < model.num_layers:
        warnings.append(
            f"llama.cpp: -ngl {m.n_gpu_layers} keeps {model.num_layers - m.n_gpu_layers} of"
            f" {model.num_layers} layers in host RAM (decode then runs at host-memory speed)"
        )
    elif gpu.memory_bytes - memory.total < FIT_TARGET_BYTES:
        warnings.append(
            "llama.cpp: less than 1024 MiB would stay free; --fit (on by default) may lower -ngl or"
            " -c for unset flags"
        )
    argv = cmdline.command(
        s.model_path,
        n_ctx=m.n_ctx,
        quant=model.quant,
        n_parallel=s.parallel,
        kv_unified=s.kv_unified,
        cache_type_k=cache_type,
        cache_type_v=cache_type,
        n_gpu_layers=s.n_gpu_layers,
        tp=s.tp,
        host=s.host,
        port=s.port or DEFAULT_PORT,
    )
    details = {
        "n_ctx": m.n_ctx,
        "n_ctx_per_slot": m.n_ctx_per_slot,
        "n_parallel": m.n_parallel,
        "kv_unified": m.kv_unified,
        "n_gpu_layers": m.n_gpu_layers,
        "compute_buffer_bytes": m.compute_bytes,
        "output_buffer_bytes": m.output_bytes,
        "kv_cells": m.kv_cells,
    }
    return EngineFit(
        memory, fits, m.n_ctx_per_slot, m.n_parallel, cache_type, details, argv, warnings, m.n_parallel
    )

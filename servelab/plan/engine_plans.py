"""One adapter per engine: run the engine's memory rules for a request and express the result as a MemoryBytes
breakdown, a fit verdict, the engine's details and its launch argv. The rules themselves live in
servelab.engines.<engine>.memory and the flag spelling in servelab.engines.<engine>.recipe.
"""

from __future__ import annotations

from dataclasses import dataclass

from servelab.engines.llamacpp import memory as llamacpp_mem
from servelab.engines.llamacpp import recipe as llamacpp_recipe
from servelab.engines.sglang import memory as sglang_mem
from servelab.engines.sglang import recipe as sglang_recipe
from servelab.engines.vllm import memory as vllm_mem
from servelab.engines.vllm import recipe as vllm_recipe
from servelab.hardware.gpus import GPU
from servelab.model.spec import ModelSpec
from servelab.plan.types import MemoryBytes
from servelab.plan.weights import weight_bytes

ENGINES = ("sglang", "vllm", "llamacpp")
FIT_TARGET_BYTES = 1024**3  # llama.cpp --fit keeps 1024 MiB free per device


@dataclass(frozen=True)
class PlanSettings:
    context: int
    kv_dtype: str | None = None
    tp: int = 1
    parallel: int = 1  # concurrent sequences to plan for
    mem_fraction_static: float | None = None
    gpu_memory_utilization: float | None = None
    max_total_tokens: int | None = None
    n_gpu_layers: int | None = None
    kv_unified: bool = (
        False  # llama.cpp: one pool all slots share (-c = context) instead of -c = context x slots
    )
    max_mamba_cache_size: int | None = None
    host: str = "127.0.0.1"
    port: int | None = None
    model_path: str = ""


@dataclass(frozen=True)
class EngineFit:
    memory: MemoryBytes
    fits: bool
    context_served: int
    slots: int
    kv_dtype: str
    details: dict[str, object]
    argv: list[str]
    warnings: list[str]
    max_batch: int


def _breakdown(model: ModelSpec, tp: int, *, vision: bool, mtp: bool) -> tuple[int, int, int]:
    w = weight_bytes(model, vision=vision, mtp=mtp)
    return w.language // tp, w.vision // tp, w.mtp // tp


def _memory(
    gpu: GPU, text: int, vision: int, mtp: int, kv: int, state: int, act: int, runtime: int, host: int = 0
) -> MemoryBytes:
    weights = text + vision + mtp
    return MemoryBytes(
        weights,
        kv,
        state,
        act,
        runtime,
        weights + kv + state + act + runtime,
        gpu.memory_bytes,
        text,
        vision,
        mtp,
        host,
    )


def plan_sglang(model: ModelSpec, gpu: GPU, s: PlanSettings) -> EngineFit:
    kv_dtype, note = sglang_mem.engine_kv_dtype(s.kv_dtype)
    text, vision, mtp = _breakdown(model, s.tp, vision=True, mtp=False)
    running = s.parallel if s.parallel > 1 else None
    free = gpu.memory_bytes - gpu.runtime_context_bytes
    m = sglang_mem.sglang_memory(
        model,
        gpu_memory_bytes=gpu.memory_bytes,
        free_memory_bytes=free,
        weights_bytes=text + vision,
        tp=s.tp,
        kv_cache_dtype=kv_dtype,
        context_length=s.context,
        max_total_tokens=s.max_total_tokens,
        mem_fraction_static=s.mem_fraction_static,
        max_running_requests=running,
        max_mamba_cache_size=s.max_mamba_cache_size,
    )
    activations = max(0, free - int(m.mem_fraction_static * free))
    memory = _memory(
        gpu, text, vision, mtp, m.kv_pool_bytes, m.mamba_pool_bytes, activations, gpu.runtime_context_bytes
    )
    served = m.max_req_len + 1 if m.max_req_len else 0
    argv = sglang_recipe.command(
        s.model_path,
        quant=model.quant,
        context_length=s.context,
        kv_cache_dtype=kv_dtype,
        tp=s.tp,
        max_total_tokens=s.max_total_tokens,
        mem_fraction_static=s.mem_fraction_static,
        max_running_requests=running,
        max_mamba_cache_size=s.max_mamba_cache_size,
        host=s.host,
        port=s.port or sglang_recipe.DEFAULT_PORT,
    )
    details = {
        "mem_fraction_static": m.mem_fraction_static,
        "max_total_tokens": m.max_total_tokens,
        "max_req_len": m.max_req_len,
        "max_running_requests": m.max_running_requests,
        "chunked_prefill_size": m.chunked_prefill_size,
        "cuda_graph_max_bs": m.cuda_graph_max_bs,
        "mamba_cache_size": m.mamba_cache_size,
        "kv_cell_bytes": m.kv_cell_bytes,
        "mamba_state_bytes_per_request": m.mamba_state_bytes_per_request,
    }
    fits = m.fits and served >= s.context and s.context <= model.max_context  # else sglang refuses to start
    max_batch = max(1, min(m.max_running_requests, m.max_total_tokens // 1024 if m.max_total_tokens else 1))
    return EngineFit(
        memory,
        fits,
        served,
        m.max_running_requests,
        kv_dtype,
        details,
        argv,
        [w for w in (note, *m.warnings) if w],
        max_batch,
    )


def plan_vllm(model: ModelSpec, gpu: GPU, s: PlanSettings) -> EngineFit:
    kv_dtype, note = vllm_mem.engine_kv_dtype(s.kv_dtype)
    text, vision, mtp = _breakdown(model, s.tp, vision=True, mtp=False)
    align = (
        32
        if (gpu.name in ("rtx5090", "b200") and model.attention and model.attention.head_dim >= 256)
        else 16
    )
    util = 0.9 if s.gpu_memory_utilization is None else s.gpu_memory_utilization
    m = vllm_mem.vllm_memory(
        model,
        gpu_memory_bytes=gpu.memory_bytes,
        weights_bytes=text + vision,
        tp=s.tp,
        gpu_memory_utilization=util,
        max_model_len=s.context,
        max_num_seqs=s.parallel if s.parallel > 1 else None,
        kv_cache_dtype=kv_dtype,
        block_align=align,
    )
    seqs = min(m.max_num_seqs, m.mamba_blocks) if m.mamba_blocks else m.max_num_seqs
    pool = m.num_blocks * m.page_bytes * m.group_size
    recurrent_layers = model.count("linear_attention") + model.count("mamba")
    mamba_groups = -(-recurrent_layers // m.group_size) if recurrent_layers else 0
    state = pool * mamba_groups // max(1, m.num_groups)  # the pool's layer-proportional share
    memory = _memory(
        gpu,
        text,
        vision,
        mtp,
        pool - state,
        state,
        m.activation_bytes + m.cuda_graph_bytes,
        m.non_torch_bytes + gpu.runtime_context_bytes,
    )
    argv = vllm_recipe.command(
        s.model_path,
        quant=model.quant,
        max_model_len=s.context,
        kv_cache_dtype=kv_dtype,
        tp=s.tp,
        gpu_memory_utilization=s.gpu_memory_utilization,
        max_num_seqs=seqs if seqs != m.max_num_seqs or s.parallel > 1 else None,
        host=s.host,
        port=s.port or vllm_recipe.DEFAULT_PORT,
    )
    details = {
        "gpu_memory_utilization": util,
        "kv_budget_bytes": m.kv_budget_bytes,
        "block_size": m.block_size,
        "num_blocks": m.num_blocks,
        "kv_tokens": m.kv_tokens,
        "padding_layers": m.padding_layers,
        "max_concurrency": round(m.max_concurrency, 2),
        "max_num_seqs": seqs,
        "estimated_max_model_len": m.estimated_max_model_len,
        "mamba_blocks": m.mamba_blocks,
    }
    fits = m.num_blocks >= m.blocks_per_request and m.kv_budget_bytes > 0 and s.context <= model.max_context
    return EngineFit(
        memory,
        fits,
        m.estimated_max_model_len,
        seqs,
        kv_dtype,
        details,
        argv,
        [w for w in (note, *m.warnings) if w],
        max(1, min(seqs, int(m.max_concurrency * 8) or 1)),
    )


def _max_gpu_layers(model: ModelSpec, gpu: GPU, flags: dict[str, object]) -> int:
    """The most layers -ngl can put on the GPU within its memory (0 when not even one fits)."""
    budget = gpu.memory_bytes - gpu.runtime_context_bytes
    low, high = 0, model.num_layers + 1
    while low < high:
        mid = (low + high + 1) // 2
        if llamacpp_mem.llamacpp_memory(model, n_gpu_layers=mid, **flags).gpu_bytes <= budget:  # type: ignore[arg-type]
            low = mid
        else:
            high = mid - 1
    return low


def plan_llamacpp(model: ModelSpec, gpu: GPU, s: PlanSettings) -> EngineFit:
    cache_type, note = llamacpp_mem.engine_kv_dtype(s.kv_dtype)
    n_ctx = s.context if s.kv_unified else s.context * s.parallel
    flags: dict[str, object] = {
        "n_ctx": n_ctx,
        "n_parallel": s.parallel,
        "kv_unified": s.kv_unified,
        "cache_type_k": cache_type,
        "cache_type_v": cache_type,
        "flash_attn": True,
    }
    m = llamacpp_mem.llamacpp_memory(model, n_gpu_layers=s.n_gpu_layers, **flags)  # type: ignore[arg-type]
    runtime, tp = gpu.runtime_context_bytes, s.tp  # -sm layer: each GPU holds 1/tp of the layers
    memory = _memory(
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
    argv = llamacpp_recipe.command(
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
        port=s.port or llamacpp_recipe.DEFAULT_PORT,
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


ADAPTERS = {"sglang": plan_sglang, "vllm": plan_vllm, "llamacpp": plan_llamacpp}

"""What an engine's planner adapter returns, and the settings it is asked with (pure values).

Each engine's ``planner.py`` (reached through the registry's ``Planner``) runs its own memory rules for a
request and expresses the result as an ``EngineFit``; ``plan.make`` turns that into a ``Plan``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from servelab.hardware.gpus import GPU
from servelab.model.spec import ModelSpec
from servelab.plan.types import MemoryBytes
from servelab.plan.weights import weight_bytes


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
    kv_cache_space_gib: int | None = None  # vLLM on CPU: VLLM_CPU_KVCACHE_SPACE
    max_num_seqs: int | None = None  # vLLM --max-num-seqs (default: --parallel when > 1, else vLLM's)
    max_num_batched_tokens: int | None = None  # vLLM --max-num-batched-tokens
    kv_cache_memory_bytes: int | None = None  # vLLM --kv-cache-memory-bytes: the KV pool, no profiling
    n_batch: int | None = None  # llama.cpp -b (logical batch; default 2048)
    n_ubatch: int | None = None  # llama.cpp -ub (physical batch that sizes the compute buffer; default 512)
    n_cpu_moe: int | None = None  # llama.cpp --n-cpu-moe N: the experts of the first N layers in host RAM
    cpu_moe: bool = False  # llama.cpp -ot exps=CPU (--cpu-moe): every layer's experts in host RAM
    flash_attn: str | None = None  # llama.cpp -fa on/off/auto (None: on, as the plan emits it)
    kv_dtype_v: str | None = None  # llama.cpp -ctv when the V cache type differs from -ctk (kv_dtype)
    host: str = "127.0.0.1"
    port: int | None = None
    model_path: str = ""


@dataclass(frozen=True)
class Refusal:
    """Why the engine would refuse these settings: not start at all, or not serve the asked context. `message`
    names the engine's own complaint and the flag that fixes it; `fix` holds the PlanSettings values that remedy
    it without shrinking the request (the search applies them), empty when only a shorter context, a smaller
    quant or more memory helps."""

    message: str
    fix: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class EngineFit:
    memory: MemoryBytes
    fits: bool
    context_served: int
    slots: int
    kv_dtype: str
    details: Mapping[str, object]
    argv: list[str]
    warnings: list[str]
    max_batch: int
    refusals: tuple[Refusal, ...] = ()  # any refusal makes the plan `fits: false`


def weight_split(model: ModelSpec, tp: int, *, vision: bool, mtp: bool) -> tuple[int, int, int]:
    """Text, vision and MTP weight bytes per GPU when ``tp`` GPUs share them."""
    w = weight_bytes(model, vision=vision, mtp=mtp)
    return w.language // tp, w.vision // tp, w.mtp // tp


def memory_bytes(
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

"""What an engine's planner adapter returns, and the settings it is asked with (pure values).

Each engine's ``planner.py`` (reached through the registry's ``Planner``) runs its own memory rules for a
request and expresses the result as an ``EngineFit``; ``plan.make`` turns that into a ``Plan``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

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
    details: Mapping[str, object]
    argv: list[str]
    warnings: list[str]
    max_batch: int


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

"""What only vLLM reports of its effective configuration (its part of verify's `EffectiveConfig.own`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class VllmReported:
    gpu_memory_utilization: float | None = None
    kv_blocks: int | None = None  # the KV pool in blocks (num_gpu_blocks, the CPU build's too)
    kv_block_size: int | None = None  # tokens per KV block
    prefix_caching: bool | None = None

"""What only Ollama reports of its effective configuration (its part of verify's `EffectiveConfig.own`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class OllamaReported:
    loaded: bool | None = None  # the model is in memory (/api/ps)
    size_bytes: int | None = None
    size_vram_bytes: int | None = None
    gpu_fraction: float | None = None  # size_vram / size

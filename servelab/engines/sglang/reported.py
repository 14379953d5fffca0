"""What only sglang reports of its effective configuration (its part of verify's `EffectiveConfig.own`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SglangReported:
    mem_fraction_static: float | None = None
    max_request_input_tokens: int | None = None
    quantization: str | None = None

"""What only llama-server reports of its effective configuration (its part of verify's `EffectiveConfig.own`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LlamaCppReported:
    kv_unified: bool | None = None  # /props, on builds that expose it

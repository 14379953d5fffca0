"""The keys ``servelab verify`` compares, and which effective-config field reports each.

Shared by every engine's ``verify_rules.py``; an engine overrides ``reported`` only where its served
value is not a single field (sglang: the context is also bounded by the KV pool).
"""

from __future__ import annotations

from typing import Any

FIELD_OF_KEY = {
    "context": "context_per_slot",
    "slots": "slots",
    "kv_dtype": "kv_cache_dtype",
    "model": "model",
    "max_total_tokens": "max_total_tokens",
    "tp_size": "tp_size",
}
LABELS = {
    "context": "context per request",
    "slots": "slots",
    "kv_dtype": "KV cache dtype",
    "model": "model",
    "max_total_tokens": "KV pool capacity (tokens)",
    "tp_size": "tensor-parallel size",
    "speculative": "speculative decoding",
}


def reported_value(key: str, got: Any) -> Any:
    """What the server reports for ``key`` (an EffectiveConfig), or None when it does not say."""
    if key == "speculative":
        spec = got.speculative
        return spec.get("enabled") if isinstance(spec, dict) else None
    return getattr(got, FIELD_OF_KEY[key], None)

"""A generic OpenAI-compatible server reports little beyond its model list and, sometimes, a context."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from servelab.engines.verify_keys import LABELS
from servelab.engines.verify_keys import reported_value as reported

if TYPE_CHECKING:
    from servelab.results.configs import Asked, EffectiveConfig

__all__ = ["LABELS", "UNREPORTED", "explain", "notes", "reported"]

UNREPORTED = {
    key: "a generic OpenAI-compatible server does not report it"
    for key in ("slots", "kv_dtype", "max_total_tokens", "tp_size", "speculative")
}


def explain(
    key: str, asked_value: Any, got_value: Any, asked: Asked, got: EffectiveConfig
) -> tuple[str, str] | None:
    return None


def notes(got: EffectiveConfig) -> tuple[str, ...]:
    """Things worth knowing about this server even when nothing was asked."""
    return ()

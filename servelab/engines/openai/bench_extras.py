"""Benchmark extras for a generic OpenAI-compatible server (NInfer and others), also the fallback.

We ask for what vLLM-style servers honour and others ignore: ``ignore_eos`` (exact output lengths),
``stream_options.include_usage`` (server token counts) and ``continuous_usage_stats`` (tokens per chunk).
/tokenize is tried vLLM-style (``{"prompt"}`` or ``{"messages"}`` → ``{"count", "tokens"}``).
"""

from __future__ import annotations

from typing import Any

from servelab.engines.http import HttpProbe
from servelab.engines.prometheus import ServerMetric

ACCEPTS_TOKEN_IDS = False  # unknown servers: send text, verified against /tokenize when it exists
KEEP_ALIVE = True  # connections are reused between requests
SNAPSHOT_PATHS: tuple[str, ...] = ("/metrics",)
SERVER_METRICS: tuple[ServerMetric, ...] = ()  # no per-level /metrics series followed yet


def request_fields() -> dict[str, Any]:
    return {"ignore_eos": True, "stream_options": {"include_usage": True, "continuous_usage_stats": True}}


def tokenize(probe: HttpProbe, text: str, model: str | None) -> list[int] | None:
    """Token ids of ``text`` without special tokens, or None when the server has no such endpoint."""
    body = probe.post_json("/tokenize", {"model": model, "prompt": text, "add_special_tokens": False})
    tokens = body.get("tokens") if isinstance(body, dict) else None
    return tokens if isinstance(tokens, list) else None


def count_chat_tokens(probe: HttpProbe, messages: list[dict], model: str | None) -> int | None:
    """Prompt tokens of a chat request with the template applied, or None."""
    body = probe.post_json("/tokenize", {"model": model, "messages": messages, "add_generation_prompt": True})
    count = body.get("count") if isinstance(body, dict) else None
    return count if isinstance(count, int) else None

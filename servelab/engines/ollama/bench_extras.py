"""Benchmark extras for Ollama's OpenAI API (/v1): include_usage only; no ignore_eos, no /tokenize."""

from __future__ import annotations

from typing import Any

from servelab.engines.http import HttpProbe
from servelab.engines.prometheus import ServerMetric

ACCEPTS_TOKEN_IDS = False
KEEP_ALIVE = True  # connections are reused between requests
SNAPSHOT_PATHS: tuple[str, ...] = ()
SERVER_METRICS: tuple[ServerMetric, ...] = ()  # no per-level /metrics series followed yet


def request_fields() -> dict[str, Any]:
    return {"stream_options": {"include_usage": True}}


def tokenize(probe: HttpProbe, text: str, model: str | None) -> list[int] | None:
    return None


def count_chat_tokens(probe: HttpProbe, messages: list[dict], model: str | None) -> int | None:
    return None

"""Benchmark extras for sglang: its OpenAI API takes ignore_eos and stream_options (with
continuous_usage_stats); token counting goes through /tokenize where the build has it, else text lengths
are recorded as built and the server's usage gives the achieved count."""

from __future__ import annotations

from servelab.engines.openai.bench_extras import count_chat_tokens, request_fields, tokenize
from servelab.engines.prometheus import ServerMetric

ACCEPTS_TOKEN_IDS = True  # /v1/completions accepts a list of token ids
KEEP_ALIVE = True  # connections are reused between requests
SNAPSHOT_PATHS: tuple[str, ...] = ("/metrics",)
SERVER_METRICS: tuple[ServerMetric, ...] = ()  # no per-level /metrics series followed yet

__all__ = [
    "ACCEPTS_TOKEN_IDS",
    "KEEP_ALIVE",
    "SERVER_METRICS",
    "SNAPSHOT_PATHS",
    "count_chat_tokens",
    "request_fields",
    "tokenize",
]

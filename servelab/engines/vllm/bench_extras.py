"""Benchmark extras for vLLM: ignore_eos, continuous usage stats, /tokenize, token-id prompts, /metrics.

vLLM's /tokenize takes ``{"model", "prompt"}`` or ``{"model", "messages"}`` and returns ``{"count",
"tokens", "max_model_len"}`` (vllm/entrypoints/openai/serving_tokenization.py); /v1/completions accepts
a list of token ids as ``prompt``.
"""

from __future__ import annotations

from servelab.engines.openai.bench_extras import count_chat_tokens, request_fields, tokenize

ACCEPTS_TOKEN_IDS = True
KEEP_ALIVE = True  # connections are reused between requests
SNAPSHOT_PATHS: tuple[str, ...] = ("/metrics",)

__all__ = [
    "ACCEPTS_TOKEN_IDS",
    "KEEP_ALIVE",
    "SNAPSHOT_PATHS",
    "count_chat_tokens",
    "request_fields",
    "tokenize",
]

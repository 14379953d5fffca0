"""Benchmark extras for llama-server.

Request fields: ``ignore_eos``, ``stream_options.include_usage`` and ``timings_per_token``: every chunk
then carries ``timings`` (prompt_n, cache_n, predicted_n, predicted_per_second …), whose cumulative
predicted_n gives the tokens in each chunk (llama.cpp holds back tokens that end inside a UTF-8 sequence).
POST /tokenize ``{"content", "add_special"}`` → ``{"tokens"}``; POST /apply-template ``{"messages"}`` →
``{"prompt"}`` (the chat template applied); /v1/completions accepts a list of token ids as ``prompt``.
/slots and /metrics are snapshotted around each level (/metrics needs ``--metrics``).
"""

from __future__ import annotations

from typing import Any

from servelab.engines.http import HttpProbe
from servelab.engines.prometheus import ServerMetric

ACCEPTS_TOKEN_IDS = True
# This build (b1-0c1e570) answers "Keep-Alive: timeout=5, max=100" but closes the connection after a
# streamed answer (curl: "Connection died, retrying a fresh connect"); a request written to that dead
# connection fails, so the client opens a fresh connection per request (connect time is not in TTFT:
# the send is stamped once the request headers are written).
KEEP_ALIVE = False
SNAPSHOT_PATHS: tuple[str, ...] = ("/metrics", "/slots")
SERVER_METRICS: tuple[ServerMetric, ...] = ()  # no per-level /metrics series followed yet


def request_fields() -> dict[str, Any]:
    return {"ignore_eos": True, "stream_options": {"include_usage": True}, "timings_per_token": True}


def tokenize(probe: HttpProbe, text: str, model: str | None) -> list[int] | None:
    body = probe.post_json("/tokenize", {"content": text, "add_special": False})
    tokens = body.get("tokens") if isinstance(body, dict) else None
    return tokens if isinstance(tokens, list) else None


def count_chat_tokens(probe: HttpProbe, messages: list[dict], model: str | None) -> int | None:
    applied = probe.post_json("/apply-template", {"messages": messages})
    prompt = applied.get("prompt") if isinstance(applied, dict) else None
    if not isinstance(prompt, str):
        return None
    body = probe.post_json("/tokenize", {"content": prompt, "add_special": True})
    tokens = body.get("tokens") if isinstance(body, dict) else None
    return len(tokens) if isinstance(tokens, list) else None

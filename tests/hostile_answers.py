"""Answers of an OpenAI-compatible server with hostile text in one field each, as raw HTTP bytes (for
tests/answer_server.py): ``hostile_answer(field, value)``.

Every field a server fills: the delta's role, content, reasoning and tool calls, a completion's text, the
finish reason, the id and model, usage's keys and values, llama.cpp's timings, an error event inside the
stream, and the HTTP error answers (a JSON error body, a text body, the reason phrase, Retry-After). Values
are written as JSON escapes where JSON allows them (``\\ud800`` is legal JSON, a lone surrogate once decoded)
and as raw bytes in the head (invalid UTF-8 there decodes to surrogates).
"""

from __future__ import annotations

import json

from tests.answer_server import http_answer, sse_head

STREAM_FIELDS = (
    "role",
    "content",
    "reasoning_content",
    "tool_calls",
    "text",
    "finish_reason",
    "id",
    "model",
    "usage_key",
    "usage_value",
    "timings_key",
    "timings_value",
    "stream_error",
)
ERROR_FIELDS = ("error_json", "error_text", "error_reason", "retry_after")
FIELDS = STREAM_FIELDS + ERROR_FIELDS
VALUES = (
    "\ud800",  # a lone high surrogate
    "a\udfffb",  # a lone low surrogate inside text
    "nul\x00inside",
    "\x1b]8;;http://x\x07esc",
    "\u202e\u200bbidi",
    "long " + "\ud800x" * 40_000,  # overlong, with surrogates all along
)


def _event(value: dict) -> bytes:
    return b"data: " + json.dumps(value).encode() + b"\n\n"  # ensure_ascii: surrogates as \\udXXX escapes


def _chunk(delta: dict | None = None, finish: object = None, **top: object) -> bytes:
    return _event({"choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}], **top})


def hostile_stream(field: str, value: str) -> bytes:
    """A whole 200 answer: a 3-chunk chat stream with ``value`` in ``field``."""
    parts = [sse_head()]
    delta: dict = {"role": value if field == "role" else "assistant"}
    top: dict = {}
    if field in ("id", "model"):
        top[field] = value
    parts.append(_chunk(delta, **top))
    if field == "content":
        parts.append(_chunk({"content": value}))
    elif field == "reasoning_content":
        parts.append(_chunk({"reasoning_content": value}))
    elif field == "tool_calls":
        parts.append(_chunk({"tool_calls": [{"index": 0, "function": {"name": value, "arguments": value}}]}))
    elif field == "text":
        parts.append(_event({"choices": [{"index": 0, "text": value, "finish_reason": None}]}))
    else:
        parts.append(_chunk({"content": "a"}))
    if field == "stream_error":
        parts.append(_event({"error": {"message": value, "code": 500}}))
        return b"".join(parts)
    parts.append(_chunk({"content": "b"}))
    parts.append(_chunk({}, value if field == "finish_reason" else "stop"))
    usage: dict = {"prompt_tokens": 5, "completion_tokens": 2}
    if field == "usage_key":
        usage[value] = 1
    if field == "usage_value":
        usage["prompt_tokens_details"] = {"cached_tokens": value}
    timings: dict = {"prompt_n": 5, "predicted_n": 2}
    if field == "timings_key":
        timings[value] = 1.5
    if field == "timings_value":
        timings["note"] = value
    parts.append(_event({"choices": [], "usage": usage, "timings": timings}))
    parts.append(b"data: [DONE]\n\n")
    return b"".join(parts)


def hostile_error(field: str, value: str) -> bytes:
    """A whole error answer with ``value`` in its body, reason phrase or Retry-After header."""
    raw = value.encode("utf-8", "surrogatepass")  # lone surrogates as (invalid) UTF-8 bytes
    if field == "error_json":
        return http_answer("500 Internal Server Error", json.dumps({"error": {"message": value}}).encode())
    if field == "error_text":
        return http_answer("400 Bad Request", raw, kind="text/plain")
    head = b"HTTP/1.1 429 " + (
        raw[:200].replace(b"\r", b"").replace(b"\n", b"") if field == "error_reason" else b"Too Many"
    )
    head += b"\r\nContent-Length: 0\r\nConnection: close\r\n"
    if field == "retry_after":
        head += b"Retry-After: " + raw[:200].replace(b"\r", b"").replace(b"\n", b"") + b"\r\n"
    return head + b"\r\n"


def hostile_answer(field: str, value: str) -> bytes:
    return hostile_error(field, value) if field in ERROR_FIELDS else hostile_stream(field, value)


def case(serial: int) -> tuple[str, str]:
    """The (field, value) of the ``serial``-th answer (1-based): every field with every value in turn."""
    index = serial - 1
    return FIELDS[index % len(FIELDS)], VALUES[(index // len(FIELDS)) % len(VALUES)]

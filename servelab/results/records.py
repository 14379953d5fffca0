"""`RequestRecord`: one request of a benchmark, as data. Written to the store the moment it completes.

Timestamps are monotonic nanoseconds (`time.perf_counter_ns()`), relative to nothing in particular;
the run stores one wall-clock anchor (`wall_anchor_ns` paired with `mono_anchor_ns`) to place them in time.
Token counts fit ``MAX_TOKENS`` (the ``array("i")`` of chunk tokens and SQLite's INTEGER both hold them).
A failed request is a record with `status="error"` and an `error_kind`, never an exception out of the load loop.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field

ERROR_KINDS = (
    "connect",  # refused / unreachable
    "http_429",  # rate limited (Retry-After honoured by nobody: it is recorded)
    "http_4xx",
    "http_5xx",
    "redirect",  # a 3xx: not followed (or, with --follow-redirects, to another host or port); where it pointed
    "timeout",  # no byte for longer than the stall timeout
    "dropped",  # connection closed mid-stream, before [DONE] / finish_reason
    "malformed",  # a chunk that is not valid SSE / JSON, or a value of the wrong type, range or size
    "too_large",  # an SSE line/event over --max-line-bytes, or a body over --max-body-bytes
    "deadline",  # the whole request took longer than --deadline (keep-alives or a drip never end it)
    "client_error",  # an unexpected failure inside the client: the request is still on the books
    "cancelled",  # interrupted by the user (Ctrl-C) before it finished
)


MAX_TOKENS = 2**31 - 1  # a server's token count above this is malformed


def storable_text(text: str) -> str:
    """``text`` as UTF-8 can hold it: a lone UTF-16 surrogate (legal as a JSON escape, ``\\ud800``, and what
    invalid UTF-8 in a header decodes to) is written as its escape, so a store or a journal never refuses it."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


@dataclass(kw_only=True)
class RequestRecord:
    target_index: int  # which target of the run (order of the URLs)
    level: str  # "c=4" for a closed-loop level, "r=2.5" for an open-loop rate
    repeat: int  # 0-based repetition of the level
    request_index: int  # index of the prompt in the workload: identical across targets
    phase: str  # "warmup" or "measure"
    status: str  # "ok" or "error"
    sent_ns: int  # when the request was written to the socket
    end_ns: int  # last byte / failure
    intended_ns: int | None = None  # open loop: the scheduled send time; closed loop: when it was queued
    first_token_ns: int | None = None  # first chunk with content, reasoning or tool-call text
    error_kind: str | None = None
    error: str | None = None  # short message; never contains the API key
    http_status: int | None = None
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    tokens_source: str = "client"  # "server" (usage) or "client" (counted chunks/tokenizer)
    max_tokens: int | None = None  # what was asked
    finish_reason: str | None = None
    early_eos: bool = False  # stopped before max_tokens although ignore_eos was requested
    evicted: bool = False  # its prompt was processed again (slot eviction / re-prefill)
    cached_prompt_tokens: int | None = None  # llama.cpp timings.cache_n / usage.prompt_tokens_details
    chunk_ns: array = field(default_factory=lambda: array("q"))  # arrival of each content chunk
    chunk_tokens: array = field(default_factory=lambda: array("i"))  # tokens carried by each chunk
    server_timings: dict | None = None  # llama.cpp `timings`, as returned
    # added by the bench client (stored in the `extra` column):
    chunk_tokens_source: str | None = None  # "usage" (continuous usage deltas) or "one_per_chunk"
    token_mismatch: bool = False  # server usage and the streamed chunk tokens disagree
    expected_prompt_tokens: int | None = (
        None  # what the workload built (verified against /tokenize when it could)
    )
    expected_cached_tokens: int | None = (
        None  # prefix the server should have cached (shared-prefix, multi-turn)
    )
    eviction_signal: str | None = None  # why `evicted` is set: "cache_n", "prompt_n" or "reprefill_gap"
    request_id: str | None = None  # sent as X-Request-Id: joins this record with the server's own logs

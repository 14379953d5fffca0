"""What an OpenAI-style stream says, chunk by chunk: pure bookkeeping, no I/O.

A chunk is token-bearing when its delta has non-empty ``content``, ``reasoning_content`` (or ``reasoning``)
or ``tool_calls`` (chat) or non-empty ``text`` (completions). Role-only, empty and usage-only chunks never
are, so they never count as the first token. Tokens per chunk come from continuous usage deltas
(``usage.completion_tokens`` in every chunk, vLLM's ``continuous_usage_stats``) when the server sends them,
or from llama.cpp's per-chunk ``timings.predicted_n`` (``timings_per_token``), else 1 per token-bearing chunk
(llama.cpp streams one token per chunk, but holds back a token whose text is an incomplete UTF-8 sequence
and sends it with the next one).
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from servelab.results.records import MAX_TOKENS, storable_text

if TYPE_CHECKING:
    from servelab.results.records import RequestRecord

FINISH_REASON_MAX = 64  # characters: "stop", "length", "tool_calls"... anything longer is not one


class MalformedEvent(ValueError):
    """A server value of the wrong type, range or size: the request ends as ``malformed``."""


@dataclass(kw_only=True)
class StreamTally:
    """Running state of one streamed answer."""

    first_token_ns: int | None = None
    chunk_ns: array = field(default_factory=lambda: array("q"))
    chunk_tokens: array = field(default_factory=lambda: array("i"))
    usage_seen_in_chunks: bool = False  # continuous usage: token counts come from deltas
    usage_completion: int = 0  # last cumulative completion_tokens seen
    pending_tokens: int = 0  # usage tokens announced by chunks that carried no text
    final_usage: dict | None = None
    finish_reason: str | None = None
    timings: dict | None = None
    done: bool = False  # [DONE] seen
    server_error: str | None = None  # an {"error": ...} event inside the stream
    bad_text: str | None = None  # the answer's text or finish reason was not valid Unicode (kind malformed)

    def add(self, event: dict, t_ns: int) -> None:
        """Account one decoded JSON event received at t_ns."""
        choices = event.get("choices")
        if "error" in event and not choices:
            self.server_error = _error_text(event["error"])
            return
        if "usage" in event or "timings" in event:  # most chunks carry neither: two lookups fewer
            self._extras(event, bool(choices))
        if not choices or type(choices) is not list:
            return
        choice = choices[0]
        if type(choice) is not dict:
            return
        finish = choice.get("finish_reason")
        if finish:
            if type(finish) is not str or len(finish) > FINISH_REASON_MAX:
                raise MalformedEvent(f"finish_reason is not a short string: {str(finish)[:80]!r}")
            if not finish.isascii() and (stored := storable_text(finish)) != finish:
                self.bad_text = self.bad_text or f"finish_reason is not valid Unicode: {stored!r}"
                finish = stored
            self.finish_reason = finish
        delta = choice.get("delta")
        content = delta.get("content") if type(delta) is dict else None
        if content:  # the common chat chunk first
            if type(content) is not str:
                raise MalformedEvent(f"delta content is not a string: a {type(content).__name__}")
        elif not _bears_token(choice):
            return
        if self.first_token_ns is None:
            self.first_token_ns = t_ns
        self.chunk_ns.append(t_ns)
        self.chunk_tokens.append(self.pending_tokens if self.usage_seen_in_chunks else 1)
        self.pending_tokens = 0

    def check_text(self, event: dict) -> None:
        """Look for a lone surrogate (a ``\\udXXX`` escape without its pair) in the answer's text: called only
        for an event whose JSON held a ``\\u`` escape, so the usual chunk costs nothing."""
        choices = event.get("choices")
        choice = choices[0] if type(choices) is list and choices else None
        if type(choice) is not dict or self.bad_text is not None:
            return
        delta = choice.get("delta")
        texts = [("text", choice.get("text"))]
        if type(delta) is dict:
            texts += [(name, delta.get(name)) for name in ("content", "reasoning_content", "reasoning")]
        for name, text in texts:
            if type(text) is str and storable_text(text) != text:
                self.bad_text = f"{name} is not valid Unicode (a lone UTF-16 surrogate)"
                return

    def _extras(self, event: dict, with_choices: bool) -> None:
        usage = event.get("usage")
        if usage is not None and isinstance(usage, dict):
            self._usage(usage, with_choices)
        timings = event.get("timings")
        if timings is not None and isinstance(timings, dict):
            self.timings = timings
            if with_choices and "predicted_n" in timings:  # llama.cpp timings_per_token
                self._usage({"completion_tokens": timings["predicted_n"]}, True)

    def _usage(self, usage: dict, with_choices: bool) -> None:
        if "prompt_tokens" in usage or self.final_usage is None:
            self.final_usage = usage
        completion = usage.get("completion_tokens")
        if with_choices and completion is not None:
            completion = _checked(completion, "completion_tokens")
            self.usage_seen_in_chunks = True
            self.pending_tokens += max(0, completion - self.usage_completion)
            self.usage_completion = completion

    def settle(self) -> None:
        """At the end: tokens the server counted after the last text-bearing chunk (text it held back or
        never sent) are added to that last chunk, the latest moment they can be placed."""
        if not self.usage_seen_in_chunks or not len(self.chunk_tokens):
            return
        final = (self.final_usage or {}).get("completion_tokens")
        if final is not None:
            final = token_count(final, "completion_tokens")
        if final is not None and final > self.usage_completion:  # counted only in the usage-only chunk
            self.pending_tokens += final - self.usage_completion
            self.usage_completion = final
        self.chunk_tokens[-1] += self.pending_tokens
        self.pending_tokens = 0

    @property
    def chunk_tokens_source(self) -> str:
        return "usage" if self.usage_seen_in_chunks else "one_per_chunk"

    @property
    def finished(self) -> bool:
        """The answer ended properly: [DONE], or a finish_reason (some servers omit [DONE])."""
        return self.done or self.finish_reason is not None


def _bears_token(choice: dict) -> bool:
    """A completions ``text``, or a delta's reasoning or tool calls (its ``content`` was looked at first);
    text of a type other than a string is MalformedEvent."""
    text = choice.get("text")
    if text:
        return _text(text, "text")
    delta = choice.get("delta")
    if not isinstance(delta, dict):
        return False
    reasoning = delta.get("reasoning_content") or delta.get("reasoning")
    if reasoning:
        return _text(reasoning, "reasoning")
    return bool(delta.get("tool_calls"))


def _text(value: Any, name: str) -> bool:
    if type(value) is not str:
        raise MalformedEvent(f"{name} is not a string: a {type(value).__name__}")
    return True


def _error_text(error: Any) -> str:
    if isinstance(error, dict):
        return str(error.get("message") or error)[:200]
    return str(error)[:200]


def token_count(value: Any, name: str) -> int | None:
    """A server's token count: None when absent, an int in 0..MAX_TOKENS, else MalformedEvent."""
    return None if value is None else _checked(value, name)


def _checked(value: Any, name: str) -> int:
    if type(value) is not int or not 0 <= value <= MAX_TOKENS:
        shown = f"{value.bit_length()}-bit integer" if type(value) is int else type(value).__name__
        raise MalformedEvent(f"{name} is not a token count (0 to {MAX_TOKENS}): a {shown}")
    return value


def flat_timings(timings: dict | None) -> dict | None:
    """llama.cpp ``timings`` as stored: its scalar entries only (numbers in range, short strings)."""
    if timings is None:
        return None
    out: dict = {}
    for key, value in list(timings.items())[:64]:
        if (type(value) is int and abs(value) <= MAX_TOKENS) or type(value) in (float, bool):
            out[str(key)[:64]] = value
        elif type(value) is str:
            out[str(key)[:64]] = value[:200]
    return out


def count_tokens(record: RequestRecord, tally: StreamTally, ignore_eos: bool) -> None:
    """Token counts with provenance: server usage when given, else the streamed chunks.

    MalformedEvent when a count is not a token count (wrong type, negative, over MAX_TOKENS); the
    caller marks the record ``malformed``."""
    streamed = sum(tally.chunk_tokens)
    usage = tally.final_usage or {}
    completion = token_count(usage.get("completion_tokens"), "completion_tokens")
    prompt = token_count(usage.get("prompt_tokens"), "prompt_tokens")
    record.server_timings = flat_timings(tally.timings)
    timings = record.server_timings or {}
    if completion is not None:
        record.output_tokens, record.tokens_source = completion, "server"
        record.token_mismatch = record.status == "ok" and completion != streamed
    else:
        record.output_tokens, record.tokens_source = streamed, "client"
    record.prompt_tokens = (
        prompt if isinstance(prompt, int) else _prompt_tokens(timings.get("prompt_n"), timings.get("cache_n"))
    )
    details = usage.get("prompt_tokens_details") or {}
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    cached = token_count(cached, "cached_tokens")
    cache_n = timings.get("cache_n")
    record.cached_prompt_tokens = cached if cached is not None else _in_range(cache_n)
    asked = record.max_tokens
    if record.status == "ok" and ignore_eos and asked and record.output_tokens is not None:
        record.early_eos = record.output_tokens < asked


def _prompt_tokens(prompt_n: Any, cache_n: Any) -> int | None:
    prompt_n, cache_n = _in_range(prompt_n), _in_range(cache_n)
    if prompt_n is not None:
        return min(MAX_TOKENS, prompt_n + (cache_n or 0))
    return None


def _in_range(value: Any) -> int | None:
    """A timings count (flat_timings kept only ints in range): non-negative, else none."""
    return value if type(value) is int and 0 <= value <= MAX_TOKENS else None

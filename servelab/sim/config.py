"""What `servelab sim` does, as data: timing, chunking, usage reporting and faults on demand."""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from servelab.errors import ConfigError
from servelab.predict.words import CHAT_TOKENS_PER_MESSAGE, CHAT_TOKENS_PER_PROMPT, message_text
from servelab.ranges import count, number

FAULT_KINDS = ("refuse", "500", "429", "drop", "malformed", "stall")
USAGE_MODES = ("honour", "off", "final", "continuous")
MAX_TOKENS = 1_000_000  # per answer (and per chunk)
MAX_CONTEXT = 10_000_000
MAX_DELAY_MS = 3_600_000.0  # an hour


@dataclass(frozen=True)
class Fault:
    """A fault hits requests n (0-based, in arrival order) where floor((n+1)·rate) > floor(n·rate).

    So exactly floor(N·rate) of the first N requests are hit, evenly spread; rate 1 hits every request.
    """

    kind: str
    rate: float = 1.0

    def hits(self, n: int) -> bool:
        rate = Fraction(str(self.rate))
        return math.floor((n + 1) * rate) > math.floor(n * rate)


@dataclass(frozen=True, kw_only=True)
class SimConfig:
    host: str = "127.0.0.1"
    port: int = 0  # 0: the OS picks a free port
    model: str = "sim-model"
    ttft_ms: float = 20.0  # from receiving the request to the first content chunk
    itl_ms: float = 10.0  # per token; a chunk of K tokens follows the previous one after K·itl_ms
    tokens_per_chunk: int = 1
    max_tokens: int = 64  # when the request does not say
    role_chunk: bool = True  # send {"role": "assistant", "content": ""} at once, before the first token
    usage: str = "honour"  # honour stream_options / off / always final / always continuous (+ final)
    honour_ignore_eos: bool = True
    eos_after: int | None = None  # natural answer length: stop here unless ignore_eos is honoured
    keepalive_ms: float | None = None  # ": keep-alive" comment while nothing else is due for this long
    faults: tuple[Fault, ...] = ()
    context: int = 32768  # prompt + max_tokens beyond this is refused with HTTP 400
    stall_s: float = 3600.0  # how long a "stall" fault holds the stream silent
    slots: int | None = None  # at most this many answers at once; the rest wait in arrival order (FIFO)

    def __post_init__(self) -> None:
        if self.usage not in USAGE_MODES:
            raise ConfigError(f"unknown usage mode {self.usage!r}; choose one of {', '.join(USAGE_MODES)}")
        if not self.host.strip():
            raise ConfigError(
                "--host is empty (that would bind every interface); give an address, e.g. 127.0.0.1"
            )
        count(self.port, "--port", 0, 65535)
        count(self.tokens_per_chunk, "--tokens-per-chunk", 1, MAX_TOKENS)
        count(self.max_tokens, "--max-tokens", 1, MAX_TOKENS)
        count(self.context, "--context", 2, MAX_CONTEXT, "tokens")
        if self.slots is not None:
            count(self.slots, "--slots", 1, 1_000_000, "answers at once")
        if self.eos_after is not None:
            count(self.eos_after, "--eos-after", 1, MAX_TOKENS, "tokens")
        for option, value in (("--ttft-ms", self.ttft_ms), ("--itl-ms", self.itl_ms)):
            number(value, option, 0, MAX_DELAY_MS, "ms")
        if self.keepalive_ms is not None:
            number(self.keepalive_ms, "--keepalive-ms", 0, MAX_DELAY_MS, "ms", above=True)

    def capacity_req_s(self, output_tokens: int) -> float | None:
        """Requests/s the sim sustains with ``slots``: each slot holds an answer ttft + (out − 1)·itl long
        (the last chunk's deadline, chunk_deadline_ns); None without a slot limit."""
        if self.slots is None:
            return None
        chunks = math.ceil(output_tokens / self.tokens_per_chunk)
        busy_ms = self.ttft_ms + (chunks - 1) * self.tokens_per_chunk * self.itl_ms
        return self.slots * 1000.0 / busy_ms if busy_ms > 0 else math.inf

    def chunk_deadline_ns(self, t0_ns: int, chunk: int) -> int:
        """When content chunk ``chunk`` (0-based) is due: t0 + ttft + chunk·K·itl (absolute, never relative)."""
        return t0_ns + round(self.ttft_ms * 1e6 + chunk * self.tokens_per_chunk * self.itl_ms * 1e6)


def fault_for(faults: tuple[Fault, ...], n: int) -> str | None:
    """The fault request ``n`` (0-based, arrival order) gets, if any.

    Faults are tried in the order given; each counts only the requests the faults before it left alone, so
    every kind is injected even where rates coincide: ``500:0.5`` then ``drop:0.5`` make half the requests
    500 and a quarter drop mid-stream (exactly floor(M·rate) of the M requests a fault sees).
    """
    index = n  # n's position among the requests the faults so far left alone
    for fault in faults:
        if fault.hits(index):
            return fault.kind
        index -= math.floor(index * Fraction(str(fault.rate)))  # minus those this fault took before n
    return None


def parse_fault(text: str) -> Fault:
    """``KIND`` or ``KIND:RATE`` (rate in (0, 1]) → Fault, ConfigError naming the choices otherwise."""
    kind, _, rate_text = text.partition(":")
    if kind not in FAULT_KINDS:
        raise ConfigError(
            f"unknown fault {kind!r}; choose one of {', '.join(FAULT_KINDS)} (optionally KIND:RATE)"
        )
    try:
        rate = float(rate_text) if rate_text else 1.0
    except ValueError:
        raise ConfigError(f"bad fault rate {rate_text!r} in {text!r}; use a number in (0, 1]") from None
    if not 0 < rate <= 1:
        raise ConfigError(f"fault rate {rate} in {text!r} is outside (0, 1]")
    return Fault(kind, rate)


def sim_prompt_tokens(body: dict, chat: bool) -> int:
    """The sim's tokenizer: one token per whitespace-separated word, ids count one each; chat adds a template."""
    if chat:
        messages = body.get("messages") or []
        words = sum(len(message_text(m.get("content")).split()) for m in messages if isinstance(m, dict))
        return words + CHAT_TOKENS_PER_MESSAGE * len(messages) + CHAT_TOKENS_PER_PROMPT
    return _prompt_tokens(body.get("prompt", ""))


def _prompt_tokens(prompt: object) -> int:
    if isinstance(prompt, str):
        return len(prompt.split())
    if isinstance(prompt, list) and prompt and isinstance(prompt[0], int):
        return len(prompt)
    if isinstance(prompt, list) and prompt:
        return _prompt_tokens(prompt[0])
    return 0

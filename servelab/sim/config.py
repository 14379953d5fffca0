"""What `servelab sim` does, as data: timing, chunking, usage reporting and faults on demand."""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from servelab.errors import ConfigError

FAULT_KINDS = ("refuse", "500", "429", "drop", "malformed", "stall")
USAGE_MODES = ("honour", "off", "final", "continuous")
CHAT_TOKENS_PER_MESSAGE = 4  # the sim's "chat template": 4 tokens around each message ...
CHAT_TOKENS_PER_PROMPT = 2  # ... and 2 for the assistant turn header


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


@dataclass(frozen=True)
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

    def __post_init__(self) -> None:
        if self.usage not in USAGE_MODES:
            raise ConfigError(f"unknown usage mode {self.usage!r}; choose one of {', '.join(USAGE_MODES)}")
        if self.tokens_per_chunk < 1 or self.max_tokens < 1 or self.context < 2:
            raise ConfigError("--tokens-per-chunk and --max-tokens must be >= 1 and --context >= 2")
        if self.ttft_ms < 0 or self.itl_ms < 0:
            raise ConfigError("--ttft-ms and --itl-ms must be >= 0")

    def chunk_deadline_ns(self, t0_ns: int, chunk: int) -> int:
        """When content chunk ``chunk`` (0-based) is due: t0 + ttft + chunk·K·itl (absolute, never relative)."""
        return t0_ns + round(self.ttft_ms * 1e6 + chunk * self.tokens_per_chunk * self.itl_ms * 1e6)


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
        words = sum(len(_text_of(m.get("content")).split()) for m in messages if isinstance(m, dict))
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


def _text_of(content: object) -> str:
    if isinstance(content, list):  # [{"type": "text", "text": ...}]
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content or "")

"""The emulator's value types (a leaf: engine packages import it for their schedulers).

A `Sequence` follows vLLM V1's bookkeeping: `tokens` known (prompt + generated), `computed` of them with KV
in the cache. A step schedules `Work` for some sequences (a prefill chunk, or the one new token of a decode);
when a sequence's computed tokens catch up with its known tokens the step samples its next token(s). Prefill
and decode are the same operation at different lengths, so chunked prefill, recompute after preemption and
prefix-cache hits are all changes to `computed`.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Sequence as Seq
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

F = TypeVar("F")


@dataclass(frozen=True)
class Request:
    """One request as the workload sends it (virtual seconds)."""

    rid: int
    arrival_s: float
    prompt: tuple[int, ...]  # token ids: prefix caches and slot similarity compare them
    output_tokens: int


@dataclass(eq=False, kw_only=True)  # a sequence is itself: compared by identity
class Sequence:
    request: Request
    computed: int = 0  # tokens with KV in the cache
    generated: int = 0
    cached: int = 0  # prompt tokens found in a cache at (the last) admission
    preemptions: int = 0
    spec_credit: float = 0.0  # speculative decoding: expected tokens not yet emitted
    token_times: list[float] = field(default_factory=list)  # one entry per emission (a chunk)
    token_counts: list[int] = field(default_factory=list)  # tokens in each emission
    prompt_len: int = field(init=False)

    def __post_init__(self) -> None:
        self.prompt_len = len(self.request.prompt)

    @property
    def tokens(self) -> int:
        """Known tokens: the prompt plus what was generated (recomputed whole after a preemption)."""
        return self.prompt_len + self.generated

    @property
    def pending(self) -> int:
        """Tokens to compute before the next sample: a prefill's rest, or 1 in decode."""
        return self.tokens - self.computed

    @property
    def decoding(self) -> bool:
        return self.generated > 0 and self.pending == 1

    @property
    def done(self) -> bool:
        return self.generated >= self.request.output_tokens

    @property
    def first_token_s(self) -> float | None:
        return self.token_times[0] if self.token_times else None


@dataclass(frozen=True)
class Work:
    """One sequence's share of a step: `new` tokens computed after `context` already cached."""

    seq: Sequence
    new: int
    context: int
    verify: int = 0  # speculative decoding: draft tokens verified alongside the new token

    @property
    def prompt(self) -> bool:
        """It computes prompt tokens (a prefill chunk, or a recompute after preemption), not a decode."""
        return not self.verify and (self.new > 1 or self.seq.generated == 0)


@dataclass(frozen=True)
class Step:
    """What one engine iteration runs: forward passes in order (llama.cpp splits a batch into ubatches; the
    others run one pass), the sequences' tokens sampled at its end."""

    passes: tuple[tuple[Work, ...], ...]

    @property
    def works(self) -> tuple[Work, ...]:
        return tuple(w for p in self.passes for w in p)

    @property
    def tokens(self) -> int:
        return sum(w.new + w.verify for w in self.works)


@dataclass(frozen=True)
class Speculation:
    """Speculative decoding: `gamma` drafts per verify step, `accept_length` tokens emitted per step on
    average (bonus included; speculative/theory.py), each draft step costing `draft_cost` of a target step."""

    gamma: int
    accept_length: float
    draft_cost: float


@dataclass(frozen=True)
class EngineSetup(Generic[F]):
    """What an engine's scheduler is built from: the plan's engine figures (its planner's typed `Figures`, read
    from `Plan.details`), its slots and served context, and the model's kind."""

    figures: F
    slots: int
    context: int  # the longest request (prompt + output) the engine serves
    hybrid: bool = False  # the model keeps a recurrent state per sequence (a state pool caps concurrency)
    speculation: Speculation | None = None


class Scheduler(Protocol):
    """An engine's scheduler as the emulator drives it. `launch_window_s`: a step that admits a new request
    starts only after the server has taken in every request that arrives this soon after it (0: at once)."""

    launch_window_s: float

    def add(self, seq: Sequence) -> str | None:
        """A request arrives; a one-line refusal (the engine's HTTP 400) when it can never be served."""

    def schedule(self) -> Step | None:
        """The next step, or None when nothing can run (idle until the next arrival)."""

    def finished(self, seq: Sequence) -> None:
        """`seq` emitted its last token: release what it holds."""

    def has_work(self) -> bool: ...

    def steady(self, step: Step) -> int:
        """How many more steps exactly like `step` (plain decodes, each one token further) come before any
        scheduling decision could change: no admission, no finish, no preemption; 0 when unsure."""


StepSeconds = Callable[[Seq[Work]], float]  # the time of one forward pass (roofline.Roofline.pass_s)


def emit(seq: Sequence, now_s: float, work: Work, speculation: Speculation | None) -> int:
    """Apply a step's work to `seq` at `now_s`; the tokens it emitted (0 mid-prefill)."""
    seq.computed += work.new
    if seq.computed < seq.tokens:
        return 0
    count = 1
    if work.verify and speculation is not None:
        seq.spec_credit += speculation.accept_length
        count = max(1, int(seq.spec_credit))
        seq.spec_credit -= count
    count = min(count, seq.request.output_tokens - seq.generated)
    seq.generated += count
    seq.computed = seq.tokens - 1  # the newest token is computed by the next step
    seq.token_times.append(now_s)
    seq.token_counts.append(count)
    return count

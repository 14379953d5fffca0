"""`SpecObservation`: what an engine's logs or metrics say about speculative acceptance (a plain value).

Engines fill it (servelab/engines/<engine>/speculative.py); ``servelab.speculative.sources`` turns it into an
accept length. Any field may be unknown (None): engines report different subsets.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class SpecObservation:
    engine: str
    where: str  # log path or metrics URL
    samples: int  # log lines or metric series read
    accepted_tokens: float | None = None  # draft tokens the target accepted (sum)
    drafted_tokens: float | None = None  # draft tokens proposed (sum)
    verify_steps: float | None = None  # verify steps (drafts) over which they were proposed
    accept_length: float | None = None  # mean tokens per step, bonus included, as the engine reports it
    token_accept_rate: float | None = None  # accepted / drafted, as the engine reports it
    draft_tokens: int | None = None  # gamma, when the engine says it

    def merged(self, other: SpecObservation) -> SpecObservation:
        """Two observations of the same engine pooled (sums add; means weighted by samples)."""
        total = self.samples + other.samples
        return SpecObservation(
            engine=self.engine,
            where=self.where if self.where == other.where else f"{self.where}, {other.where}",
            samples=total,
            accepted_tokens=_add(self.accepted_tokens, other.accepted_tokens),
            drafted_tokens=_add(self.drafted_tokens, other.drafted_tokens),
            verify_steps=_add(self.verify_steps, other.verify_steps),
            accept_length=_mean(self.accept_length, self.samples, other.accept_length, other.samples),
            token_accept_rate=_mean(
                self.token_accept_rate, self.samples, other.token_accept_rate, other.samples
            ),
            draft_tokens=self.draft_tokens or other.draft_tokens,
        )


def _add(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a + b


def _mean(a: float | None, wa: int, b: float | None, wb: int) -> float | None:
    if a is None or b is None:
        return a if b is None else b
    return (a * wa + b * wb) / (wa + wb)

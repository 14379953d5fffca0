"""The verdict on speculative decoding: keep, tune (to which gamma) or roll back, with the reason.

The measured speedup decides when two benchmark runs (or two tok/s figures) are given; otherwise the
prediction E / (gamma * c + 1). When measured, the theory's other predictions are scaled by
measured / predicted before tuning is considered, so a tuning advice never promises more than the machine showed.
Tuning only ever proposes FEWER draft tokens: acceptance beyond the configured positions was never observed,
and verifying more tokens costs more than the theory's verify_cost = 1, so "more" is a hint in `why`, not a verdict.
"""

from __future__ import annotations

from dataclasses import dataclass

from servelab.speculative.sources import Acceptance
from servelab.speculative.theory import (
    MAX_GAMMA,
    alpha_from_accept_length,
    best_draft_tokens,
    predicted_speedup,
)

DEFAULT_DRAFT_COST = 0.1  # a draft model about a tenth of the target (an MTP/EAGLE head is nearer 0.02-0.05)
MIN_GAIN = 1.05  # below a 5% gain speculation is not worth its memory and complexity
MIN_RESCUE_GAIN = (
    1.10  # a losing setup is only worth re-tuning if theory promises 10%: it is optimistic at low alpha
)


@dataclass(frozen=True, kw_only=True)
class SpecVerdict:
    alpha: float
    expected_tokens_per_step: float  # E, bonus token included
    token_accept_rate: float | None
    draft_tokens: int
    draft_cost: float
    draft_cost_source: str
    predicted_speedup: float
    measured_speedup: float | None
    best_draft_tokens: int  # the best gamma not above the configured one
    best_predicted_speedup: float  # at best_draft_tokens, scaled by measured/predicted when measured
    verdict: str  # "keep", "tune" or "rollback"
    why: str
    acceptance_source: str
    engine: str | None = None
    where: str | None = None
    samples: int = 0


def decide(
    acceptance: Acceptance,
    draft_cost: float = DEFAULT_DRAFT_COST,
    measured_speedup: float | None = None,
    draft_cost_source: str = "default",
) -> SpecVerdict:
    """Theory plus (optionally) measurement to a verdict."""
    gamma = acceptance.draft_tokens
    alpha = alpha_from_accept_length(acceptance.accept_length, gamma)
    predicted = predicted_speedup(alpha, gamma, draft_cost)
    best_gamma, best = best_draft_tokens(alpha, draft_cost, gamma)
    scale = 1.0 if measured_speedup is None else measured_speedup / predicted
    best *= scale
    speedup = predicted if measured_speedup is None else measured_speedup
    verdict, why = _verdict(
        alpha, acceptance.accept_length, gamma, draft_cost, speedup, measured_speedup, best_gamma, best
    )
    more_gamma, more = best_draft_tokens(alpha, draft_cost, MAX_GAMMA)
    if verdict == "keep" and more_gamma > gamma and more * scale >= speedup * MIN_GAIN:
        why += f" Theory says {more_gamma} draft tokens could give {more * scale:.2f}x; measure before raising it."
    return SpecVerdict(
        alpha=alpha,
        expected_tokens_per_step=acceptance.accept_length,
        token_accept_rate=acceptance.token_accept_rate,
        draft_tokens=gamma,
        draft_cost=draft_cost,
        draft_cost_source=draft_cost_source,
        predicted_speedup=predicted,
        measured_speedup=measured_speedup,
        best_draft_tokens=best_gamma,
        best_predicted_speedup=best,
        verdict=verdict,
        why=why,
        acceptance_source=acceptance.source,
        engine=acceptance.engine,
        where=acceptance.where,
        samples=acceptance.samples,
    )


def _verdict(
    alpha: float,
    accept_length: float,
    gamma: int,
    cost: float,
    speedup: float,
    measured: float | None,
    best_gamma: int,
    best: float,
) -> tuple[str, str]:
    kind = "measured" if measured is not None else "predicted"
    facts = (
        f"acceptance alpha = {alpha:.2f} (accept length {accept_length:.2f} tokens/step with {gamma} draft tokens), "
        f"draft cost c = {cost:.3g}: {kind} speedup {speedup:.2f}x"
    )
    tune = f"{facts}; {best_gamma} draft tokens per step would give about {best:.2f}x: use {best_gamma}."
    if speedup >= MIN_GAIN:
        better = best_gamma != gamma and best >= speedup * MIN_GAIN
        return ("tune", tune) if better else ("keep", f"{facts}: speculation pays.")
    if best_gamma != gamma and best >= MIN_RESCUE_GAIN:
        return "tune", tune
    return "rollback", (
        f"{facts}; no draft length promises a {MIN_RESCUE_GAIN:.2f}x gain (best {best_gamma}: {best:.2f}x): "
        "turn speculation off, or find a draft that agrees with the target (same quantization, unquantized head)."
    )

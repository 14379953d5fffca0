"""Speculative-decoding theory (Leviathan, Kalman, Matias, ICML 2023, arXiv:2211.17192). Pure functions.

Conventions used throughout servelab:
- ``alpha``: the per-token acceptance probability (the paper's α), assumed i.i.d. over draft positions.
- ``gamma``: draft tokens proposed per verify step (vLLM ``num_speculative_tokens``, llama.cpp
  ``--spec-draft-n-max``, sglang ``speculative_num_steps`` with top-k 1).
- accept length ``E``: tokens emitted per verify step INCLUDING the bonus (corrected) token, so
  1 <= E <= gamma + 1. This is what sglang's "accept len", vLLM's "Mean acceptance length" and llama.cpp's
  "mean len" report. Eq. (1): E = (1 - alpha^(gamma+1)) / (1 - alpha).
- token acceptance rate ``r``: accepted draft tokens / drafted tokens (vLLM "Avg Draft acceptance rate",
  llama.cpp "draft acceptance", newer sglang "accept rate"). With gamma drafts per step, E = 1 + gamma * r.
- ``draft_cost`` c: the time of one draft step over one target step. Theorem 3.8: speedup
  S = E / (gamma * c + verify_cost), with verify_cost = 1 when verifying gamma + 1 tokens costs one
  target step (decode is memory-bound).
"""

from __future__ import annotations

MAX_GAMMA = 16
_BISECTION_STEPS = 100


def expected_tokens_per_step(alpha: float, gamma: int) -> float:
    """E: tokens emitted per verify step, bonus included (Eq. 1)."""
    _check_alpha(alpha)
    _check_gamma(gamma)
    if alpha == 1.0:
        return float(gamma + 1)
    return (1.0 - alpha ** (gamma + 1)) / (1.0 - alpha)


def accept_length_from_rate(token_accept_rate: float, gamma: int) -> float:
    """E from the accepted/drafted token fraction, when every step drafts ``gamma`` tokens."""
    if not 0.0 <= token_accept_rate <= 1.0:
        raise ValueError(
            f"acceptance rate {token_accept_rate} must be between 0 and 1 (a fraction, not percent)"
        )
    _check_gamma(gamma)
    return 1.0 + gamma * token_accept_rate


def alpha_from_accept_length(accept_length: float, gamma: int) -> float:
    """Invert Eq. 1 by bisection (E grows monotonically with alpha). E <= 1 gives 0; E >= gamma+1 gives 1."""
    _check_gamma(gamma)
    if accept_length <= 1.0:
        return 0.0
    if accept_length >= gamma + 1:
        return 1.0
    low, high = 0.0, 1.0
    for _ in range(_BISECTION_STEPS):
        mid = (low + high) / 2
        if expected_tokens_per_step(mid, gamma) < accept_length:
            low = mid
        else:
            high = mid
    return (low + high) / 2


def predicted_speedup(alpha: float, gamma: int, draft_cost: float, verify_cost: float = 1.0) -> float:
    """Walltime improvement factor over plain decoding (Theorem 3.8, with an optional verify overhead)."""
    if draft_cost < 0 or verify_cost <= 0:
        raise ValueError("draft cost must be >= 0 and verify cost > 0")
    return expected_tokens_per_step(alpha, gamma) / (gamma * draft_cost + verify_cost)


def best_draft_tokens(alpha: float, draft_cost: float, max_gamma: int = MAX_GAMMA) -> tuple[int, float]:
    """The gamma in 1..max_gamma with the highest predicted speedup, and that speedup."""
    speedups = {gamma: predicted_speedup(alpha, gamma, draft_cost) for gamma in range(1, max_gamma + 1)}
    gamma = max(speedups, key=lambda g: (speedups[g], -g))
    return gamma, speedups[gamma]


def _check_alpha(alpha: float) -> None:
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha {alpha} must be between 0 and 1")


def _check_gamma(gamma: int) -> None:
    if gamma < 1:
        raise ValueError(f"draft tokens per step must be at least 1, got {gamma}")

"""Is a difference between two runs real? Mann-Whitney U on per-request samples, and a bootstrap interval.

Mann-Whitney U uses the normal approximation with tie correction and continuity correction (two-sided),
which is accurate for the sample sizes a level produces (tens to thousands of requests). Below 3 samples a
side no p-value is given.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

MIN_SAMPLES = 3


@dataclass(frozen=True)
class Significance:
    n_a: int
    n_b: int
    u: float | None
    p_value: float | None  # two-sided; None when a side has fewer than MIN_SAMPLES

    def significant(self, alpha: float = 0.05) -> bool:
        return self.p_value is not None and self.p_value < alpha


def _ranks(values: np.ndarray) -> tuple[np.ndarray, float]:
    """Average ranks (1-based) and the tie term Σ(t³ − t)."""
    order = np.argsort(values, kind="mergesort")
    sorted_values = values[order]
    ranks = np.empty(len(values))
    ties = 0.0
    start = 0
    while start < len(values):
        end = start
        while end + 1 < len(values) and sorted_values[end + 1] == sorted_values[start]:
            end += 1
        ranks[order[start : end + 1]] = (start + end) / 2 + 1
        t = end - start + 1
        ties += t**3 - t
        start = end + 1
    return ranks, ties


def mann_whitney(a: Sequence[float], b: Sequence[float]) -> Significance:
    """Two-sided Mann-Whitney U test of `a` against `b`."""
    n_a, n_b = len(a), len(b)
    if n_a < MIN_SAMPLES or n_b < MIN_SAMPLES:
        return Significance(n_a, n_b, None, None)
    ranks, ties = _ranks(np.concatenate([np.asarray(a, float), np.asarray(b, float)]))
    u_a = ranks[:n_a].sum() - n_a * (n_a + 1) / 2
    n = n_a + n_b
    variance = n_a * n_b / 12 * ((n + 1) - ties / (n * (n - 1)))
    if variance <= 0:  # every value identical
        return Significance(n_a, n_b, float(u_a), 1.0)
    z = (abs(u_a - n_a * n_b / 2) - 0.5) / math.sqrt(variance)
    p = math.erfc(max(z, 0.0) / math.sqrt(2))
    return Significance(n_a, n_b, float(u_a), min(1.0, p))


def bootstrap_median_diff(
    a: Sequence[float], b: Sequence[float], *, rounds: int = 2000, seed: int = 0, confidence: float = 0.95
) -> tuple[float, float] | None:
    """A percentile-bootstrap interval for median(b) − median(a); None when a side is empty."""
    if not len(a) or not len(b):
        return None
    rng = np.random.default_rng(seed)
    xa, xb = np.asarray(a, float), np.asarray(b, float)
    ma = np.median(rng.choice(xa, (rounds, len(xa))), axis=1)
    mb = np.median(rng.choice(xb, (rounds, len(xb))), axis=1)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(mb - ma, [tail, 100 - tail])
    return float(low), float(high)

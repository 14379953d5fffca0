"""Load schedules, pure and seeded: concurrency ladders, open-loop arrival times, steady windows, stop rules.

Open-loop send times are ABSOLUTE offsets from the level's start, precomputed from the seed: the sender
sleeps until each one, so a late send never delays the ones after it (relative sleeps drift: vLLM #21104).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from servelab.errors import ConfigError
from servelab.ranges import count, number
from servelab.results.stats import Window

DEFAULT_LADDER = (1, 2, 4, 8, 16)
MAX_CONCURRENCY = 10_000  # requests in flight from one client process
MAX_REQUESTS = 1_000_000  # measured requests per level
MAX_LEVEL_SECONDS = 86_400.0  # a level (--duration, or an open-loop schedule) lasts at most a day
# two-sided 95% t quantiles for 1..30 degrees of freedom; beyond 30 the normal 1.96 is within 2%
_T95 = (
    12.706,
    4.303,
    3.182,
    2.776,
    2.571,
    2.447,
    2.365,
    2.306,
    2.262,
    2.228,
    2.201,
    2.179,
    2.160,
    2.145,
    2.131,
    2.120,
    2.110,
    2.101,
    2.093,
    2.086,
    2.080,
    2.074,
    2.069,
    2.064,
    2.060,
    2.056,
    2.052,
    2.048,
    2.045,
    2.042,
)


def parse_concurrency(text: str) -> tuple[int, ...]:
    """``"1,2,4"`` → (1, 2, 4): positive integers, ConfigError otherwise."""
    try:
        levels = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise ConfigError(f"bad --concurrency {text!r}; use positive integers like 1,2,4,8,16") from None
    if not levels or any(c < 1 for c in levels):
        raise ConfigError(f"bad --concurrency {text!r}; use positive integers like 1,2,4,8,16")
    return tuple(count(c, "--concurrency", 1, MAX_CONCURRENCY, "requests in flight") for c in levels)


def arrival_offsets_ns(rate_per_s: float, count: int, *, burstiness: float = 1.0, seed: int = 0) -> list[int]:
    """Absolute send offsets for ``count`` requests at ``rate_per_s``.

    Gaps are Gamma(shape=burstiness, scale=1/(rate·burstiness)): burstiness 1 is Poisson, <1 burstier,
    >1 smoother, inf evenly spaced. The first request goes at offset 0.
    """
    if rate_per_s <= 0 or burstiness <= 0:
        raise ConfigError("--rate and --burstiness must be > 0")
    if count <= 0:
        return []
    if math.isinf(burstiness):
        gaps = np.full(count - 1, 1.0 / rate_per_s)
    else:
        rng = np.random.default_rng(seed)
        gaps = rng.gamma(shape=burstiness, scale=1.0 / (rate_per_s * burstiness), size=count - 1)
    return [0, *(round(x * 1e9) for x in np.cumsum(gaps))]


@dataclass(frozen=True)
class StopRule:
    """When a level ends: after ``requests`` measured requests, ``duration_s``, or ``max_errors`` errors."""

    requests: int | None = None
    duration_s: float | None = None
    max_errors: int | None = None

    def __post_init__(self) -> None:
        if self.requests is None and self.duration_s is None:
            raise ConfigError("give --requests N or --duration S")
        if self.requests is not None:
            count(self.requests, "--requests", 1, MAX_REQUESTS, "per level")
        if self.duration_s is not None:
            number(self.duration_s, "--duration", 0, MAX_LEVEL_SECONDS, "seconds", above=True)
        if self.max_errors is not None:
            count(self.max_errors, "--max-errors", 0, MAX_REQUESTS)

    def may_start(self, started: int, elapsed_ns: int, errors: int) -> bool:
        """Whether another measured request may be sent."""
        if self.requests is not None and started >= self.requests:
            return False
        if self.duration_s is not None and elapsed_ns >= self.duration_s * 1e9:
            return False
        return not self.errors_exhausted(errors)

    def errors_exhausted(self, errors: int) -> bool:
        return self.max_errors is not None and errors > self.max_errors


def steady_window(intervals: Iterable[tuple[int, int]], concurrency: int) -> Window | None:
    """From when all ``concurrency`` slots are first busy to when the first slot goes idle for good.

    ``intervals`` are (start_ns, end_ns) of the level's requests. Without a moment at full concurrency,
    the window is first start → last end, marked not steady. None when there are no intervals.
    """
    spans = sorted(intervals)
    if not spans:
        return None
    events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans], key=lambda x: (x[0], x[1]))
    inflight, t0, t1 = 0, None, None
    for t, step in events:
        before = inflight
        inflight += step
        if inflight >= concurrency and t0 is None:
            t0 = t
        if before >= concurrency > inflight:
            t1 = t  # the last time full concurrency ended: after it, never full again
    if t0 is None or t1 is None or t1 <= t0:
        return Window(spans[0][0], max(e for _, e in spans), steady=False)
    return Window(t0, t1, steady=True)


def confidence_interval(values: Sequence[float]) -> tuple[float, float] | None:
    """(mean, half-width) of a 95% t-interval over per-repeat values; None with fewer than 2."""
    if len(values) < 2:
        return None
    df = len(values) - 1
    t = _T95[df - 1] if df <= len(_T95) else 1.96
    return statistics.fmean(values), t * statistics.stdev(values) / math.sqrt(len(values))

"""What `servelab advise` is asked to meet (pure): percentile SLOs on a level's statistics, the load to carry, the
prices.

An SLO here bounds a percentile of one of the level's latency distributions (`results/stats.py` LevelStats):
`ttft_p99_ms=2000` asks that the 99th percentile of the time to first token stays at or under 2 s. bench's
`--slo` (bench/metrics.py `Slo`) judges each request instead; advise judges the level's tail, as a latency
target is usually written.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from servelab.errors import ConfigError
from servelab.ranges import number
from servelab.results.stats import DISTRIBUTIONS, PERCENTILES, LevelStats

MAX_SLO_MS = 86_400_000.0  # a day
MAX_PRICE = 1_000_000.0  # USD per GPU-hour or per kWh: far above any real price
LATENCIES = tuple(
    d for d in DISTRIBUTIONS if d.endswith("_ms")
)  # ttft_ms, itl_ms, chunk_gap_ms, tpot_ms, e2e_ms
_POINTS = {f"{p:g}".replace(".", "_"): p for p in PERCENTILES}  # "99" -> 99.0, "99_9" -> 99.9
_KEY = re.compile(r"^([a-z0-9_]+?)_p([0-9]+(?:_[0-9]+)?)_ms$")


@dataclass(frozen=True)
class Bound:
    """One SLO: the `percentile` of `metric` (a LevelStats distribution in ms) at most `limit_ms`."""

    metric: str  # "ttft_ms"
    percentile: float  # 99.0
    limit_ms: float

    @property
    def key(self) -> str:
        """As the user wrote it: ttft_p99_ms."""
        point = f"{self.percentile:g}".replace(".", "_")
        return f"{self.metric.removesuffix('_ms')}_p{point}_ms"

    def value(self, stats: LevelStats) -> float | None:
        return getattr(stats, self.metric).percentile(self.percentile)


def parse_bounds(text: str) -> tuple[Bound, ...]:
    """`ttft_p99_ms=2000,tpot_p99_ms=50` -> Bounds; one ConfigError line naming a bad key or value."""
    keys = ", ".join(f"{m.removesuffix('_ms')}_pN_ms" for m in LATENCIES)
    points = ", ".join(_POINTS)
    bounds: list[Bound] = []
    for part in (p.strip() for p in text.split(",")):
        key, sep, given = part.partition("=")
        match = _KEY.match(key.strip())
        metric = f"{match.group(1)}_ms" if match else ""
        if not sep or match is None or metric not in LATENCIES or match.group(2) not in _POINTS:
            raise ConfigError(
                f"unknown SLO {part!r} in --slo; use {keys} with N one of {points} (ttft_p99_ms=2000)"
            )
        try:
            limit = float(given)
        except ValueError:
            raise ConfigError(f"bad number {given!r} for {key} in --slo") from None
        limit = number(limit, f"--slo {key}", 0, MAX_SLO_MS, "ms", above=True)
        bounds.append(Bound(metric, _POINTS[match.group(2)], limit))
    return tuple(bounds)


def misses(
    bounds: tuple[Bound, ...], stats: LevelStats, scale: Callable[[str], float] | None = None
) -> tuple[str, ...]:
    """The SLOs `stats` breaks, each as `ttft_p99_ms 2400 > 2000`; a level without a value (no request
    finished) or with an error misses them all. `scale`: a factor per metric each value is taken at (advise's
    error bands, advise/bands.py)."""
    out = []
    if stats.errors:
        out.append(f"{stats.errors} of {stats.requests} requests refused")
    for b in bounds:
        got = b.value(stats)
        if got is not None and scale is not None:
            got *= scale(b.metric)
        if got is None or got > b.limit_ms:
            out.append(f"{b.key} {'none' if got is None else f'{got:.0f}'} > {b.limit_ms:g}")
    return tuple(out)


@dataclass(frozen=True)
class Prices:
    """USD per GPU-hour, and optionally USD per kWh at each GPU's board power (an upper bound: decode draws less,
    docs/advise.md)."""

    gpu_hour: float | None = None
    kwh: float | None = None

    def __post_init__(self) -> None:
        if self.gpu_hour is not None:
            number(self.gpu_hour, "--price", 0, MAX_PRICE, "USD per GPU-hour")
        if self.kwh is not None:
            number(self.kwh, "--power-price", 0, MAX_PRICE, "USD per kWh")

    def per_hour(self, gpus: int, board_w: float | None) -> float | None:
        """What `gpus` cost for an hour; None without a price."""
        if self.gpu_hour is None and self.kwh is None:
            return None
        energy = (self.kwh or 0.0) * (board_w or 0.0) / 1000
        return gpus * ((self.gpu_hour or 0.0) + energy)


def cost_per_million(per_hour_usd: float | None, output_tok_s: float) -> float | None:
    """USD per million output tokens at `output_tok_s`; None without a price or without tokens."""
    if per_hour_usd is None or output_tok_s <= 0:
        return None
    return per_hour_usd / (output_tok_s * 3600) * 1e6

"""`--ramp SECONDS`: the load rises linearly at the start of each level, outside the steady window (pure).

Closed loop: worker k of c starts at k·R/c, so the concurrency climbs 1, 2, … c over R seconds. Open loop:
the arrival intensity climbs linearly from 0 to the level's rate r over R seconds, λ(t) = r·t/R, then stays
at r. The arrivals are the seeded unit-rate process of `schedule.arrival_offsets_ns` (Gamma gaps, the same
burstiness) mapped through the inverse of Λ(t) = ∫λ: for operational time s ≤ S = r·R/2, t = √(2·R·s/r);
after it t = R + (s − S)/r. About r·R/2 requests arrive during the ramp. Requests sent before R are the
ramp's (`phase = "ramp"`): stored, and left out of every figure of the level, like warm-up requests.
"""

from __future__ import annotations

import math

import numpy as np

from servelab.errors import ConfigError

NS_PER_S = 1_000_000_000
_CHUNK = 1024  # unit-rate gaps drawn at a time until the schedule is long enough


def closed_start_offsets_ns(concurrency: int, ramp_s: float) -> list[int]:
    """When each of ``concurrency`` workers starts, from the level's start: k·R/c."""
    return [round(k * ramp_s * NS_PER_S / concurrency) for k in range(concurrency)]


def ramped_arrival_offsets_ns(
    rate_per_s: float, measured: int, ramp_s: float, *, burstiness: float = 1.0, seed: int = 0
) -> tuple[list[int], int]:
    """(offsets, ramp_count): the ramp's arrivals (offset < R) first, then ``measured`` arrivals at the rate."""
    if rate_per_s <= 0 or burstiness <= 0 or ramp_s <= 0:
        raise ConfigError("--rate, --burstiness and --ramp must be > 0")
    ramp_ns = ramp_s * NS_PER_S
    operational = _unit_arrivals(burstiness, seed)
    offsets: list[int] = []
    ramp_count = 0
    while len(offsets) - ramp_count < measured:
        t_ns = round(_ramp_time_s(next(operational), rate_per_s, ramp_s) * NS_PER_S)
        if t_ns < ramp_ns:
            ramp_count += 1
        offsets.append(t_ns)
    return offsets, ramp_count


def _ramp_time_s(s: float, rate: float, ramp_s: float) -> float:
    """The inverse of Λ(t): the time at which the expected arrivals reach ``s``."""
    full = rate * ramp_s / 2  # Λ(R)
    if s <= full:
        return math.sqrt(2 * ramp_s * s / rate)
    return ramp_s + (s - full) / rate


def _unit_arrivals(burstiness: float, seed: int):
    """0, then the running sum of unit-mean Gamma(burstiness) gaps (evenly spaced for inf), forever."""
    rng = np.random.default_rng(seed)
    total = 0.0
    yield total
    while True:
        if math.isinf(burstiness):
            gaps = np.ones(_CHUNK)
        else:
            gaps = rng.gamma(shape=burstiness, scale=1.0 / burstiness, size=_CHUNK)
        for gap in gaps:
            total += float(gap)
            yield total

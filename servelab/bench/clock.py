"""A worker's monotonic clock mapped onto the coordinator's (pure): offsets from round trips, and their bound.

A round trip: the coordinator reads its clock (c0), asks the worker for its clock (w), and reads its own again
when the answer is back (c1). The worker read its clock somewhere between, so the offset o that maps the
worker's clock onto the coordinator's (coordinator = worker + o) lies in [c0 - w, c1 - w]: the midpoint is
the estimate, half the round trip its bound, with no assumption about the two legs being equal. Of several
round trips the shortest gives the tightest bound. Estimated before and after each level; the level's
records are mapped with the offset taken before it (records are stored as they arrive). While the true
offset moves steadily between the two moments (clock rates differ by a few parts per million), its error
during the level is at most the larger of the bound before and the bound after plus how far the estimate
moved (drift): that is the level's recorded bound.

Workers on the coordinator's own machine share its clock: perf_counter_ns is CLOCK_MONOTONIC on Linux, one
clock for every process of a boot, so their offset is 0 exactly (bound 0), no estimate needed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

SHARED = "shared CLOCK_MONOTONIC (one machine)"
ROUND_TRIPS = "round trips"


@dataclass(frozen=True)
class ClockEstimate:
    offset_ns: int  # coordinator time = worker time + offset_ns
    bound_ns: int  # |true offset - offset_ns| <= bound_ns
    source: str = ROUND_TRIPS

    def to_coordinator(self, worker_ns: int) -> int:
        return worker_ns + self.offset_ns

    def to_worker(self, coordinator_ns: int) -> int:
        return coordinator_ns - self.offset_ns


SHARED_CLOCK = ClockEstimate(0, 0, SHARED)


def from_round_trips(trips: Sequence[tuple[int, int, int]]) -> ClockEstimate:
    """The estimate from ``(c0, w, c1)`` round trips: the one with the shortest round trip."""
    if not trips:
        raise ValueError("no round trips to estimate a clock offset from")
    c0, w, c1 = min(trips, key=lambda t: t[2] - t[0])
    if c1 < c0:
        raise ValueError("a round trip that ended before it began: not a monotonic clock")
    low, high = c0 - w, c1 - w
    return ClockEstimate((low + high) // 2, (high - low + 1) // 2)


def level_bound(before: ClockEstimate, after: ClockEstimate) -> int:
    """The bound on the offset used during a level (``before``), given the estimate after it."""
    if before.source == SHARED and after.source == SHARED:
        return 0
    return max(before.bound_ns, after.bound_ns + abs(after.offset_ns - before.offset_ns))

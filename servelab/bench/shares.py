"""A level's load split over N workers (pure): which requests each one sends, and when.

Closed loop: the concurrency is split as evenly as it goes (c=5 over 2 workers: 3 + 2 slots), and so are the
measured requests, in proportion to the slots, as contiguous runs of serials (the same prompts a single
process sends). A ``--duration`` level has no count: worker k of n sends serials warm-up + k, + k + n, ...
Open loop: one seeded absolute schedule (schedule.arrival_offsets_ns) dealt round-robin, arrival i to worker
i mod n, each sent at the common start + its offset. Warm-up requests are dealt round-robin as well.

With a ramp (bench/ramp.py) the fleet ramps as one process would. Closed loop: the level's c users start at
k·R/c (`closed_start_offsets_ns` over the whole concurrency), user k on worker k mod n (the same slots as
the even split); a request any worker takes before the common start + R is the ramp's. The ramp's requests
have serials of their own, after the measured ones (warm-up + requests + rank, + active, ...), so the
measured serials and their counts are those of a level without a ramp; a --duration level's single stream
of serials serves both, as one process's counter does. Open loop: the one seeded ramped schedule is dealt as
any other; arrival i is the ramp's when i < its ``ramp_count``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

from servelab.bench.ramp import closed_start_offsets_ns

NS_PER_S = 1_000_000_000
RAMP, MEASURE = "ramp", "measure"


@dataclass(frozen=True, kw_only=True)
class Share:
    """What one worker sends in a level. ``count`` None: measured requests until ``duration_s`` has passed."""

    worker: int
    slots: int  # closed loop: requests it keeps in flight (0 in an open-loop level)
    warmup: tuple[int, ...]  # serials of its warm-up requests
    first: int = 0  # closed loop: its measured serials are first, first + step, ...
    step: int = 1
    count: int | None = 0
    duration_s: float | None = None
    arrivals: tuple[tuple[int, int, str], ...] = ()  # open loop: (serial, offset_ns from the start, phase)
    starts_ns: tuple[int, ...] = ()  # closed loop with a ramp: when each of its slots starts, from the start
    ramp_ns: int | None = None  # closed loop with a ramp: requests taken before start + this are the ramp's
    ramp_first: int = 0  # ... and have serials ramp_first, + ramp_step, ...
    ramp_step: int = 1

    @property
    def open_loop(self) -> bool:
        return self.slots == 0

    def serials(self) -> Iterator[int]:
        """Closed loop: its measured serials, in order (endless for a --duration level)."""
        k = 0
        while self.count is None or k < self.count:
            yield self.first + k * self.step
            k += 1

    def ramp_serials(self, measured: Iterator[int]) -> Iterator[int]:
        """Closed loop with a ramp: its ramp requests' serials; a --duration level's come from ``measured``,
        the one stream of serials both phases take from."""
        if self.count is None:
            return measured
        return itertools.count(self.ramp_first, self.ramp_step)

    @property
    def idle(self) -> bool:
        """Nothing to send (c < N leaves a worker without a slot; a ramp sends even without measured ones)."""
        return not self.arrivals and (self.slots == 0 or (self.count == 0 and self.ramp_ns is None))


def _even(total: int, parts: int) -> list[int]:
    return [total // parts + (k < total % parts) for k in range(parts)]


def split_closed(
    concurrency: int,
    workers: int,
    warmup: int,
    requests: int | None,
    duration_s: float | None,
    ramp_s: float | None = None,
) -> list[Share]:
    """Shares of a closed-loop level; a worker left without a slot (c < n) gets an idle share."""
    shares = _split_closed(concurrency, workers, warmup, requests, duration_s)
    if not ramp_s:
        return shares
    starts = closed_start_offsets_ns(concurrency, ramp_s)
    active = [s.worker for s in shares if s.slots]
    after = warmup + (requests or 0)
    return [
        replace(
            s,
            starts_ns=tuple(starts[s.worker :: workers]),
            ramp_ns=round(ramp_s * NS_PER_S),
            ramp_first=after + active.index(s.worker),
            ramp_step=len(active),
        )
        if s.slots
        else s
        for s in shares
    ]


def _split_closed(
    concurrency: int, workers: int, warmup: int, requests: int | None, duration_s: float | None
) -> list[Share]:
    slots = _even(concurrency, workers)
    active = [k for k in range(workers) if slots[k]]
    deal = {k: tuple(s for s in range(warmup) if active[s % len(active)] == k) for k in active}
    shares, first = [], warmup
    counts = _by_slots(requests, slots) if requests is not None else None
    for k in range(workers):
        if not slots[k]:
            shares.append(Share(worker=k, slots=0, warmup=(), count=0))
            continue
        if counts is None:
            rank = active.index(k)
            shares.append(
                Share(
                    worker=k,
                    slots=slots[k],
                    warmup=deal[k],
                    first=warmup + rank,
                    step=len(active),
                    count=None,
                    duration_s=duration_s,
                )
            )
            continue
        shares.append(Share(worker=k, slots=slots[k], warmup=deal[k], first=first, step=1, count=counts[k]))
        first += counts[k]
    return shares


def _by_slots(requests: int, slots: Sequence[int]) -> list[int]:
    """``requests`` split in proportion to ``slots`` (largest remainders; ties to the lower worker)."""
    total = sum(slots)
    exact = [requests * s / total for s in slots]
    counts = [int(x) for x in exact]
    for k in sorted(range(len(slots)), key=lambda k: (counts[k] - exact[k], k))[: requests - sum(counts)]:
        counts[k] += 1
    return counts


def split_open(offsets_ns: Sequence[int], workers: int, warmup: int, ramp_count: int = 0) -> list[Share]:
    """Shares of an open-loop level: arrival i (serial warm-up + i) to worker i mod n; the first
    ``ramp_count`` arrivals are the ramp's."""
    dealt: list[list[tuple[int, int, str]]] = [[] for _ in range(workers)]
    for i, offset in enumerate(offsets_ns):
        dealt[i % workers].append((warmup + i, offset, RAMP if i < ramp_count else MEASURE))
    return [
        Share(worker=k, slots=0, warmup=tuple(range(k, warmup, workers)), arrivals=tuple(dealt[k]))
        for k in range(workers)
    ]

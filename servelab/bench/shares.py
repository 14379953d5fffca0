"""A level's load split over N workers (pure): which requests each one sends, and when.

Closed loop: the concurrency is split as evenly as it goes (c=5 over 2 workers: 3 + 2 slots), and so are the
measured requests, in proportion to the slots, as contiguous runs of serials (the same prompts a single
process sends). A ``--duration`` level has no count: worker k of n sends serials warm-up + k, + k + n, ...
Open loop: one seeded absolute schedule (schedule.arrival_offsets_ns) dealt round-robin, arrival i to worker
i mod n, each sent at the common start + its offset. Warm-up requests are dealt round-robin as well.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Share:
    """What one worker sends in a level. ``count`` None: measured requests until ``duration_s`` has passed."""

    worker: int
    slots: int  # closed loop: requests it keeps in flight (0 in an open-loop level)
    warmup: tuple[int, ...]  # serials of its warm-up requests
    first: int = 0  # closed loop: its measured serials are first, first + step, ...
    step: int = 1
    count: int | None = 0
    duration_s: float | None = None
    arrivals: tuple[tuple[int, int], ...] = ()  # open loop: (serial, offset_ns from the common start)

    @property
    def open_loop(self) -> bool:
        return self.slots == 0

    def serials(self) -> Iterator[int]:
        """Closed loop: its measured serials, in order (endless for a --duration level)."""
        k = 0
        while self.count is None or k < self.count:
            yield self.first + k * self.step
            k += 1

    @property
    def idle(self) -> bool:
        """No measured request to send (c < N leaves a worker without a slot)."""
        return not self.arrivals and (self.slots == 0 or self.count == 0)


def _even(total: int, parts: int) -> list[int]:
    return [total // parts + (k < total % parts) for k in range(parts)]


def split_closed(
    concurrency: int, workers: int, warmup: int, requests: int | None, duration_s: float | None
) -> list[Share]:
    """Shares of a closed-loop level; a worker left without a slot (c < n) gets an idle share."""
    slots = _even(concurrency, workers)
    active = [k for k in range(workers) if slots[k]]
    deal = {k: tuple(s for s in range(warmup) if active[s % len(active)] == k) for k in active}
    shares, first = [], warmup
    counts = _by_slots(requests, slots) if requests is not None else None
    for k in range(workers):
        if not slots[k]:
            shares.append(Share(k, 0, (), count=0))
            continue
        if counts is None:
            rank = active.index(k)
            shares.append(Share(k, slots[k], deal[k], warmup + rank, len(active), None, duration_s))
            continue
        shares.append(Share(k, slots[k], deal[k], first, 1, counts[k]))
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


def split_open(offsets_ns: Sequence[int], workers: int, warmup: int) -> list[Share]:
    """Shares of an open-loop level: arrival i (serial warm-up + i) to worker i mod n."""
    return [
        Share(
            k,
            0,
            tuple(range(k, warmup, workers)),
            arrivals=tuple((warmup + i, off) for i, off in enumerate(offsets_ns) if i % workers == k),
        )
        for k in range(workers)
    ]

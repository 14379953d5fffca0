"""The level in flight, for a live view: what the runner shares (`LiveLevel`, handed over twice a level, at
its start and end — never per request) and what a view computes from it on its own low-rate timer
(`LiveTally.read`), in its own thread, off the event loop that stamps the requests.

Everything the view reads is a counter or a list the load loop appends to (the level's records, the loop
monitor's lag samples); reading a list while another thread appends is safe in CPython, and only records
that were already appended are taken. Running medians are kept with two heaps, so each refresh costs only
the records finished since the last one. Figures "so far" are the view's; the stored statistics of a level
are `bench/summary.py`'s, computed once at its end.
"""

from __future__ import annotations

import heapq
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from servelab.bench import metrics
from servelab.bench.level import LevelState
from servelab.bench.monitor import LoopMonitor
from servelab.results.records import RequestRecord

RECENT_LAG_SAMPLES = 2000  # the client's lag so far: p99 of its last ~2 s of 1 ms ticks


@dataclass(kw_only=True)
class LiveLevel:
    url: str
    engine: str
    level: str  # "c=4" / "r=2.5"
    repeat: int
    position: int  # 0-based place of this level-repeat in the whole run (targets × levels × repeats)
    total: int  # level-repeats in the whole run
    planned: int | None  # requests this level sends (warm-up included); None when it stops on time
    duration_s: float | None  # the level's measured duration when it stops on time
    state: LevelState
    records: list[RequestRecord]
    monitor: LoopMonitor
    result: Any = None  # the LevelSummary, set when the level ends


# what a live view hands the runner (bench's or predict's): called with the level in flight at each level's start
# and end (its result set), never per request
LevelProgress = Callable[[LiveLevel], None]


class RunningMedian:
    """The median of a growing sample: two heaps, O(log n) per value."""

    def __init__(self) -> None:
        self._low: list[float] = []  # max-heap (negated)
        self._high: list[float] = []

    def add(self, value: float) -> None:
        heapq.heappush(self._low, -value)
        heapq.heappush(self._high, -heapq.heappop(self._low))
        if len(self._high) > len(self._low):
            heapq.heappush(self._low, -heapq.heappop(self._high))

    @property
    def value(self) -> float | None:
        if not self._low:
            return None
        if len(self._low) > len(self._high):
            return -self._low[0]
        return (-self._low[0] + self._high[0]) / 2


@dataclass(kw_only=True)
class LiveFigures:
    done: int
    planned: int | None
    elapsed_s: float
    fraction: float  # of this level, 0..1
    tok_s: float
    ttft_p50_ms: float | None
    itl_p50_ms: float | None
    errors: dict[str, int]
    lag_p99_ms: float | None
    wake_late_p99_ms: float | None


@dataclass
class LiveTally:
    """The view's own running figures of one level; `read` takes the records finished since the last call."""

    live: LiveLevel
    seen: int = 0
    ttft: RunningMedian = field(default_factory=RunningMedian)
    itl: RunningMedian = field(default_factory=RunningMedian)
    errors: Counter = field(default_factory=Counter)

    def read(self) -> LiveFigures:
        live, state = self.live, self.live.state
        fresh = live.records[self.seen :]
        self.seen += len(fresh)
        for record in fresh:
            if record.phase != "measure":
                continue
            if record.status != "ok":
                self.errors[record.error_kind or "error"] += 1
                continue
            ttft = metrics.ttft_ms(record)
            if ttft is not None:
                self.ttft.add(ttft)
            for gap in metrics.itl_samples_ms(record):
                self.itl.add(gap)
        elapsed = state.elapsed_ns() / 1e9
        return LiveFigures(
            done=state.done,
            planned=live.planned,
            elapsed_s=elapsed,
            fraction=_fraction(live, elapsed),
            tok_s=state.output_tokens / elapsed if elapsed > 0 else 0.0,
            ttft_p50_ms=self.ttft.value,
            itl_p50_ms=self.itl.value,
            errors=dict(self.errors),
            lag_p99_ms=_p99_ms(live.monitor.lags_ns),
            wake_late_p99_ms=_p99_ms(live.monitor.oversleep_ns),
        )


def _fraction(live: LiveLevel, elapsed_s: float) -> float:
    if live.result is not None:
        return 1.0
    if live.planned:
        return min(live.state.done / live.planned, 1.0)
    if live.duration_s:
        return min(elapsed_s / live.duration_s, 1.0)
    return 0.0


def _p99_ms(samples_ns) -> float | None:
    recent = sorted(samples_ns[-RECENT_LAG_SAMPLES:])
    return recent[min(len(recent) - 1, int(len(recent) * 0.99))] / 1e6 if recent else None


def now_s() -> float:
    return time.monotonic()

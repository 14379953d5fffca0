"""Arrival stamps taken where bytes arrive, not where a coroutine later gets round to them.

With many streams, a read can wait in the event loop behind other streams' work; a stamp taken in the
reading coroutine would charge that wait to the server. ``aiohttp_edge.ArrivalLog`` records, in aiohttp's
protocol callback, the time and running byte count of each arrival; BodyStamps cuts what a reader later
reads at those boundaries and gives each piece its arrival time (bytes that came with the headers get the
switch time, bytes never seen arriving their read time). StallWatch is the one per-client timer that
replaces aiohttp's per-read timeout where ``aiohttp_edge.check_edge`` allows it.
"""

from __future__ import annotations

import asyncio
import time
from array import array
from typing import Any


class BodyStamps:
    """Where one body's arrivals ended (in bytes) and when each came."""

    def __init__(self, base_end: int) -> None:
        self.ends = array("q")
        self.times = array("q")
        self._base_end, self._base_ns = base_end, time.perf_counter_ns()
        self._pos = 0  # bytes handed out so far
        self._i = 0

    def split(self, chunk: bytes, read_ns: int) -> list[tuple[bytes, int]]:
        """The chunk just read, cut where separate arrivals meet, each piece with its arrival time."""
        pieces: list[tuple[bytes, int]] = []
        start, n = 0, len(chunk)
        while start < n:
            end_abs, t_ns = self._arrival(self._pos + start, self._pos + n, read_ns)
            end = min(n, end_abs - self._pos)
            pieces.append((chunk if (start, end) == (0, n) else chunk[start:end], t_ns))
            start = end
        self._pos += n
        return pieces

    def _arrival(self, pos: int, chunk_end: int, read_ns: int) -> tuple[int, int]:
        if pos < self._base_end:
            return self._base_end, self._base_ns
        while self._i < len(self.ends) and self.ends[self._i] <= pos:
            self._i += 1
        if self._i >= len(self.ends):
            return chunk_end, read_ns
        return self.ends[self._i], self.times[self._i]


class StallWatch:
    """One timer per client in place of aiohttp's per-read timeout (which restarts a loop timer on every
    read): every ``interval`` it looks at each watched body's last arrival (``sink.last_ns``, set in
    ``feed_data``) and calls ``on_stall()`` for any silent for longer than ``stall_s``. A stall is noticed
    between ``stall_s`` and ``stall_s + interval`` after the last byte."""

    def __init__(self, stall_s: float) -> None:
        self.stall_ns = int(stall_s * 1e9)
        self.interval_s = min(1.0, stall_s / 4)
        self._watched: dict[Any, Any] = {}  # sink -> on_stall
        self._timer: Any = None

    def watch(self, sink: Any, on_stall: Any) -> None:
        sink.last_ns = time.perf_counter_ns()
        self._watched[sink] = on_stall
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self.interval_s, self._tick)

    def forget(self, sink: Any) -> None:
        self._watched.pop(sink, None)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._watched.clear()

    def _tick(self) -> None:
        self._timer = None
        deadline_ns = time.perf_counter_ns() - self.stall_ns
        for sink, on_stall in list(self._watched.items()):
            if sink.last_ns < deadline_ns:
                del self._watched[sink]
                on_stall()
        if self._watched:
            self._timer = asyncio.get_running_loop().call_later(self.interval_s, self._tick)

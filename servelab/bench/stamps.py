"""Arrival stamps taken where bytes arrive, not where a coroutine later gets round to them.

With many streams, a read can wait in the event loop behind other streams' work; a stamp taken in the
reading coroutine would charge that wait to the server. So each response's StreamReader is switched to a
subclass (same slots, one overridden method) whose ``feed_data`` — called from aiohttp's protocol, in the
socket's own callback — records the time and the running byte count (``total_bytes``). The reader later
cuts what it reads at those boundaries and gives each piece its arrival time. Bytes fed before the switch
(those that came with the headers) get the switch time. Should a future aiohttp refuse the switch, every
piece simply gets its read time, the plain approach.
"""

from __future__ import annotations

import asyncio
import time
from array import array
from typing import Any

import aiohttp


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


class ArrivalLog:
    """One per client: the bodies being watched, by reader identity.

    Two ways to watch a body. ``watch(reader)`` keeps aiohttp's buffering and records where each arrival
    ended (BodyStamps), for a reader that reads. ``watch_sink(reader, sink)`` hands every arrival straight
    to ``sink.arrived(data, t_ns)`` from the socket's callback — nothing is buffered and no reading task
    wakes up per read — and reports the end of the body as ``sink.closed(exc or None)``.
    """

    def __init__(self) -> None:
        watched: dict[int, BodyStamps] = {}
        sinks: dict[int, Any] = {}
        self._watched, self._sinks = watched, sinks

        class StampedStreamReader(aiohttp.StreamReader):
            __slots__ = ()

            def feed_data(self, data: bytes, *args: Any) -> Any:
                t_ns = time.perf_counter_ns()
                sink = sinks.get(id(self))
                if sink is not None:
                    if data:
                        sink.last_ns = t_ns
                        sink.arrived(data, t_ns)
                    return False
                result = super().feed_data(data, *args)
                stamps = watched.get(id(self))
                if stamps is not None:
                    stamps.ends.append(self.total_bytes)
                    stamps.times.append(t_ns)
                return result

            def feed_eof(self) -> None:
                super().feed_eof()
                sink = sinks.get(id(self))
                if sink is not None:
                    sink.closed(None)

            def set_exception(self, exc: BaseException, *args: Any) -> None:
                super().set_exception(exc, *args)
                sink = sinks.get(id(self))
                if sink is not None:
                    sink.closed(exc)

        self._reader_class = StampedStreamReader

    def _switch(self, reader: Any) -> bool:
        if type(reader) is self._reader_class:
            return True
        if type(reader) is not aiohttp.StreamReader:
            return False
        try:
            reader.__class__ = self._reader_class
        except TypeError:  # layout changed in some aiohttp
            return False
        return True

    def watch(self, reader: Any) -> BodyStamps:
        stamps = BodyStamps(int(getattr(reader, "total_bytes", 0)))
        if self._switch(reader):
            self._watched[id(reader)] = stamps
        return stamps

    def watch_sink(self, reader: Any, sink: Any) -> tuple[bytes, int] | None:
        """Send the reader's arrivals to ``sink``; (bytes already buffered, now), or None when the reader
        cannot be switched (then read it with ``watch``). The buffered bytes came with the headers."""
        if not self._switch(reader):
            return None
        head = reader.read_nowait() if not reader.exception() else b""
        self._sinks[id(reader)] = sink
        return head, time.perf_counter_ns()

    def forget(self, reader: Any) -> None:
        self._watched.pop(id(reader), None)
        self._sinks.pop(id(reader), None)


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

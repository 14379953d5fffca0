"""Every use the bench client makes of aiohttp's internals, in one place, checked before it is relied on.

Two shortcuts past aiohttp's public API keep the client's stamps true and its CPU low under load:

- **body**: each response's ``StreamReader`` is switched (``__class__``) to a subclass whose
  ``feed_data`` / ``feed_eof`` / ``set_exception`` — called by aiohttp's protocol in the socket's own
  callback — hand every read to a sink with its arrival time (``ArrivalLog.watch_sink``): nothing is
  buffered and no task wakes up per read.
- **stall timer**: the connection protocol's per-read timeout (``ResponseHandler.read_timeout``, a
  property in aiohttp 3.10 to 3.14.4) is switched off for the body, and the client's one StallWatch timer
  takes over (aiohttp restarts a loop timer on every read).

``check_edge()`` (at client start-up) tries the body switch on a throw-away reader and looks for the
timeout property. What is missing falls back to the public path, which gives the same records, only
slower: ``StreamReader.iter_any()`` stamped when the coroutine reads (later than arrival under load), and
aiohttp's own per-read timeout. The run's meta records which path ran (``client_edge``).

Read against aiohttp 3.9.5, 3.10.11, 3.11.18, 3.12.15, 3.13.5 and 3.14.0-3.14.5 (the range pyproject
allows), and this module's tests run on each: the body switch works in all of them; ``read_timeout`` is
absent in 3.9 and again from 3.14.5 (only ``_read_timeout`` is left, which this module does not touch),
so there aiohttp keeps its own per-read timer.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any, Protocol, cast

import aiohttp

from servelab.bench.stamps import BodyStamps
from servelab.results.run import EdgeReport


class BodySink(Protocol):
    """Where ``watch_sink`` delivers a body: ``last_ns`` is set at every arrival (for StallWatch)."""

    last_ns: int

    def arrived(self, data: bytes, t_ns: int) -> None: ...

    def closed(self, exc: BaseException | None) -> None: ...


def check_edge() -> EdgeReport:
    """Look for the internals this module uses in the aiohttp that is installed; never raises."""
    body_missing = _body_switch_missing()
    stall_missing = _read_timeout_missing()
    return EdgeReport(
        aiohttp_version=str(getattr(aiohttp, "__version__", "unknown")),
        body="public-reader" if body_missing else "protocol-callback",
        stall_timer="aiohttp" if (body_missing or stall_missing) else "servelab",
        missing=tuple(m for m in (body_missing, stall_missing) if m),
    )


def _body_switch_missing() -> str | None:
    """None when a real StreamReader can be switched and hands feed_data/feed_eof to a sink; else what failed."""
    reader_class = getattr(aiohttp, "StreamReader", None)
    if not isinstance(reader_class, type):
        return "aiohttp.StreamReader"
    for name in ("feed_data", "feed_eof", "set_exception", "read_nowait", "exception"):
        if not callable(getattr(reader_class, name, None)):
            return f"StreamReader.{name}"
    try:
        return _trial_switch(reader_class)
    except Exception as exc:  # any surprise in aiohttp's internals means: take the public path
        return f"StreamReader switch ({type(exc).__name__}: {exc})"


def _trial_switch(reader_class: type) -> str | None:
    from aiohttp.base_protocol import BaseProtocol

    with contextlib.closing(asyncio.new_event_loop()) as loop:  # never run: the reader only keeps it
        reader = reader_class(BaseProtocol(loop), 2**16, loop=loop)
        reader.feed_data(b"head")
        log, sink = ArrivalLog(), _TrialSink()
        head = log.watch_sink(reader, sink)
        if head is None:
            return "StreamReader.__class__ switch"
        reader.feed_data(b"body")
        reader.feed_eof()
        log.forget(reader)
    if head[0] != b"head" or sink.reads != [b"body"] or sink.ends != [None]:
        return "StreamReader feed_data/feed_eof hand-over"
    return None


class _TrialSink:
    def __init__(self) -> None:
        self.last_ns = 0
        self.reads: list[bytes] = []
        self.ends: list[BaseException | None] = []

    def arrived(self, data: bytes, t_ns: int) -> None:
        self.reads.append(data)

    def closed(self, exc: BaseException | None) -> None:
        self.ends.append(exc)


def _read_timeout_missing() -> str | None:
    try:
        from aiohttp.client_proto import ResponseHandler
        from aiohttp.connector import Connection
    except ImportError as exc:
        return f"aiohttp.client_proto.ResponseHandler ({exc})"
    timeout = getattr(ResponseHandler, "read_timeout", None)
    if not isinstance(timeout, property) or timeout.fset is None:
        return "ResponseHandler.read_timeout (settable property)"
    if not isinstance(getattr(Connection, "protocol", None), property):
        return "Connection.protocol"
    return None


def drop_read_timeout(response: aiohttp.ClientResponse) -> bool:
    """Switch off aiohttp's per-read timeout for the rest of ``response``'s body; False when it had none.

    Only when ``check_edge()`` gave ``stall_timer == "servelab"``. The timer already armed is dropped at
    the next read; aiohttp sets the timeout again per request."""
    protocol = response.connection.protocol if response.connection is not None else None
    if protocol is None:
        return False
    timed = cast(_TimedProtocol, protocol)  # check_edge() found the property
    if timed.read_timeout is None:
        return False
    timed.read_timeout = None
    return True


class _TimedProtocol(Protocol):
    """aiohttp's ResponseHandler where ``read_timeout`` is a settable property (3.10 to 3.14.4)."""

    read_timeout: float | None


def stall_error(message: str) -> aiohttp.ServerTimeoutError:
    """The error a stalled body ends with: the class aiohttp's own per-read timeout raises (the same
    record whichever timer noticed)."""
    error_class = getattr(aiohttp, "SocketTimeoutError", aiohttp.ServerTimeoutError)  # 3.10+
    return error_class(message)


class ArrivalLog:
    """One per client: the bodies being watched, by reader identity.

    Two ways to watch a body. ``watch(reader)`` keeps aiohttp's buffering and records where each arrival
    ended (BodyStamps), for a reader that reads. ``watch_sink(reader, sink)`` hands every arrival straight
    to ``sink.arrived(data, t_ns)`` from the socket's callback — nothing is buffered and no reading task
    wakes up per read — and reports the end of the body as ``sink.closed(exc or None)``.
    """

    def __init__(self) -> None:
        watched: dict[int, BodyStamps] = {}
        sinks: dict[int, BodySink] = {}
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
                    return False  # 3.14: no more data pending in the parser; earlier: ignored
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

    def _switch(self, reader: object) -> bool:
        if type(reader) is self._reader_class:
            return True
        if type(reader) is not aiohttp.StreamReader:
            return False
        try:
            reader.__class__ = self._reader_class
        except TypeError:  # layout changed in some aiohttp
            return False
        return True

    def watch(self, reader: aiohttp.StreamReader) -> BodyStamps:
        stamps = BodyStamps(int(getattr(reader, "total_bytes", 0)))
        if self._switch(reader):
            self._watched[id(reader)] = stamps
        return stamps

    def watch_sink(self, reader: aiohttp.StreamReader, sink: BodySink) -> tuple[bytes, int] | None:
        """Send the reader's arrivals to ``sink``; (bytes already buffered, now), or None when the reader
        cannot be switched (then read it the public way). The buffered bytes came with the headers."""
        if not self._switch(reader):
            return None
        parts = []
        while not reader.exception() and (part := reader.read_nowait()):  # 3.14.5 drains only the chunks
            parts.append(part)  # buffered at the call, and a resumed reader can refill the buffer inside it
        self._sinks[id(reader)] = sink
        return b"".join(parts), time.perf_counter_ns()

    def forget(self, reader: object) -> None:
        self._watched.pop(id(reader), None)
        self._sinks.pop(id(reader), None)

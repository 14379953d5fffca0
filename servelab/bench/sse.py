"""Incremental Server-Sent-Events parsing with a timestamp per event.

Raw bytes arrive in reads of any size; each read carries the monotonic time it was received. An event is
stamped with the time of the read that held its FIRST byte (its first field line). Several events that
arrive in one TCP read therefore share that read's timestamp: that is the resolution the socket gives.
Comment lines (``: keep-alive``) are counted but never become events, so they cannot be mistaken for tokens.
Lines end with LF or CRLF (what every LLM server sends); a lone CR is not a line end here.
A line, or an event's data, longer than ``max_line_bytes`` raises SseTooLarge (nothing grows without limit).
"""

from __future__ import annotations

from dataclasses import dataclass

from servelab.bench.limits import DEFAULT_MAX_LINE_BYTES


class SseTooLarge(ValueError):
    """A line or an event's data over the parser's ``max_line_bytes``."""


@dataclass(frozen=True)
class SseEvent:
    data: str  # the data lines joined with "\n"
    t_ns: int  # receive time of the read that held the event's first byte


class SseParser:
    """Feed raw reads with their receive time; get the complete events back."""

    def __init__(self, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> None:
        self.max_line_bytes = max_line_bytes
        self._data_bytes = 0  # data of the event being built
        self._partial = b""  # an incomplete line carried to the next read
        self._partial_ns = 0
        self._data: list[bytes] = []
        self._event_ns: int | None = None
        self.comments = 0  # keep-alive comments seen

    def feed(self, chunk: bytes, t_ns: int) -> list[SseEvent]:
        if not self._partial and not self._data and chunk.endswith(b"\n\n") and b"\r" not in chunk:
            return self._whole_events(chunk, t_ns)
        return self._feed_lines(chunk, t_ns)

    def _whole_events(self, chunk: bytes, t_ns: int) -> list[SseEvent]:
        """Fast path: the read holds whole events only (the usual case); one-line data events need no line
        machinery. Anything else in the read (comments, several fields) takes the general path."""
        events: list[SseEvent] = []
        for block in chunk[:-2].split(b"\n\n"):
            if block.startswith(b"data: ") and b"\n" not in block:
                events.append(SseEvent(block[6:].decode("utf-8", errors="replace"), t_ns))
            elif block:
                events.extend(self._feed_lines(block + b"\n\n", t_ns))
        return events

    def _feed_lines(self, chunk: bytes, t_ns: int) -> list[SseEvent]:
        events: list[SseEvent] = []
        pos = 0
        while True:
            end = chunk.find(b"\n", pos)
            if end < 0:
                self._keep_partial(chunk[pos:], t_ns)
                return events
            if self._partial:
                line, line_ns = self._partial + chunk[pos:end], self._partial_ns
                self._partial = b""
            else:
                line, line_ns = chunk[pos:end], t_ns
            pos = end + 1
            event = self._line(line[:-1] if line.endswith(b"\r") else line, line_ns)
            if event is not None:
                events.append(event)

    @property
    def pending(self) -> bool:
        """True when bytes of an unfinished event are buffered (a stream cut here was cut mid-event)."""
        return bool(self._partial or self._data)

    def _keep_partial(self, rest: bytes, t_ns: int) -> None:
        if rest:
            if not self._partial:
                self._partial_ns = t_ns
            self._partial += rest
            if len(self._partial) > self.max_line_bytes:
                self._partial = b""
                raise SseTooLarge(f"an SSE line longer than {self.max_line_bytes} bytes")

    def _line(self, line: bytes, line_ns: int) -> SseEvent | None:
        if not line:
            return self._dispatch()
        if line[0] == 0x3A:  # ":" comment
            self.comments += 1
            return None
        if self._event_ns is None:
            self._event_ns = line_ns
        name, _, value = line.partition(b":")
        if name == b"data":
            self._data.append(value[1:] if value.startswith(b" ") else value)
            self._data_bytes += len(value)
            if self._data_bytes > self.max_line_bytes:
                self._data, self._data_bytes = [], 0
                raise SseTooLarge(f"an SSE event longer than {self.max_line_bytes} bytes")
        return None

    def _dispatch(self) -> SseEvent | None:
        if not self._data:
            self._event_ns = None
            return None
        data = b"\n".join(self._data).decode("utf-8", errors="replace")
        event = SseEvent(data, self._event_ns if self._event_ns is not None else 0)
        self._data, self._data_bytes = [], 0
        self._event_ns = None
        return event

"""`servelab sim --emulate`: the emulated engine (servelab/predict) on the wall clock, driven by HTTP requests.

The same `EngineLoop` that `servelab predict` runs in virtual time runs here in real time: virtual second 0 is
when the server started (perf_counter, CLOCK_MONOTONIC). A request joins the scheduler when it is received
(its arrival stamp is that moment); an idle engine starts a step at once, a busy one considers it at its next
step boundary. Each step is computed when it starts and its end is a deadline on the sim's `_Ticker`: at that
deadline every sequence that sampled in the step gets its tokens written (`TokenSink.tokens`), and the next
step starts at the step's planned end, not at the moment the timer fired, so lateness never accumulates.

A request that arrives after a boundary the timer reached late joins the step starting at that boundary (the
one difference from virtual time, at most the timer's lateness, well under a millisecond with the ticker's
spin). The engine cannot take back a request whose client went away: it is computed to its end unwritten, as
a server without abort would.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from servelab.predict.emulator import EngineLoop
from servelab.predict.machine import EmulatedEngine
from servelab.predict.words import WordTokenizer
from servelab.scheduling.core import Request, Sequence
from servelab.sim.answer import SimAnswer

if TYPE_CHECKING:
    from servelab.sim.server import RequestLog


class TokenSink(Protocol):
    """Where one request's tokens go (its HTTP stream)."""

    def tokens(self, count: int, done: bool) -> None: ...


class WallClockEngine:
    """One emulated engine serving every request of the server, stepped by a timer (`start` arms it)."""

    def __init__(self, engine: EmulatedEngine, start: Callable[[WallClockEngine], object]) -> None:
        self.engine = engine
        self.loop = EngineLoop(engine.new_scheduler(), engine.roofline, engine.speculation, fast=False)
        self.origin_ns = time.perf_counter_ns()
        self.words = WordTokenizer()  # the sim's tokenizer, with ids: prefix caches compare them
        self.sinks: dict[Sequence, TokenSink] = {}
        self._start = (
            start  # hands this engine to the timer; it calls `first_due` then `step` at each deadline
        )
        self._stepping = False
        self._pending: list[tuple[Sequence, int]] = []  # the step in flight: what it emits at its end
        self._next_rid = 0

    def virtual_s(self, wall_ns: int) -> float:
        return (wall_ns - self.origin_ns) / 1e9

    def wall_ns(self, virtual_s: float) -> int:
        return self.origin_ns + round(virtual_s * 1e9)

    def submit(
        self, prompt: tuple[int, ...], output_tokens: int, received_ns: int, sink: TokenSink
    ) -> str | None:
        """A request received at `received_ns`: joins the engine, or the engine's one-line refusal."""
        at = self.virtual_s(received_ns)
        outcome = self.loop.arrive(Request(self._next_rid, at, prompt, output_tokens))
        self._next_rid += 1
        if outcome.refused is not None:
            return outcome.refused
        self.sinks[outcome.seq] = sink
        if not self._stepping:
            self.loop.now = max(self.loop.now, at)
            self._stepping = True
            self._start(self)
        return None

    # -- the timer's job (sim/server.py `_Ticker`) ----------------------------------------------------------
    def first_due(self, now_ns: int) -> int:
        return now_ns

    def step(self) -> int | None:
        """At a step boundary: write what the ended step sampled, start the next step; its end (ns), or None
        when the engine goes idle."""
        for seq, count in self._pending:
            sink = self.sinks[seq]
            if seq.done:
                del self.sinks[seq]
            sink.tokens(count, seq.done)
        result = self.loop.step()
        if result is None:
            self._pending = []
            self._stepping = False
            return None
        self._pending = result.emitted
        return self.wall_ns(self.loop.now)


class EmulatedStream:
    """One request's answer as the emulated engine produces it: tokens become SSE events written straight to
    the transport (buffered until the handler has sent the headers); `done` resolves with the last token."""

    def __init__(self, answer: SimAnswer, n: int, log: RequestLog, done: asyncio.Future[None]) -> None:
        self.answer, self.n, self.log, self.done = answer, n, log, done
        self.sent = 0  # tokens written so far
        self.transport: asyncio.Transport | None = None
        self.chunked = False
        self.streaming = False
        self._buffer: list[bytes] = []
        self.ok = True

    def attach(self, transport: asyncio.Transport | None, chunked: bool) -> None:
        """The headers are out: write what the engine produced meanwhile, then each event as it comes."""
        self.transport, self.chunked, self.streaming = transport, chunked, True
        buffered, self._buffer = self._buffer, []
        for data in buffered:
            self._write(data)

    def tokens(self, count: int, done: bool) -> None:
        written_ns = time.perf_counter_ns()
        if self.sent == 0:
            self.log["first_chunk_ns"] = written_ns
        self.log["chunks_ns"].append(written_ns)
        data = self.answer.span_event(self.n, self.sent, count)
        self.sent += count
        if done:
            tail = self.answer.usage_event(self.n) if self.answer.usage in ("final", "continuous") else b""
            data = data + tail + b"data: [DONE]\n\n"
        if self.streaming:
            self._write(data)
        else:
            self._buffer.append(data)
        if done and not self.done.done():
            self.done.set_result(None)

    def _write(self, data: bytes) -> None:
        transport = self.transport
        if transport is None or transport.is_closing():
            self.ok = False
            return
        transport.write(b"%x\r\n%b\r\n" % (len(data), data) if self.chunked else data)

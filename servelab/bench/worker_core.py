"""One worker of a fleet (bench --workers / --ray): its share of a level, sent from its own event loop.

The coordinator drives it with messages; it answers with messages (tuples, through ``emit``):

    coordinator → worker                       worker → coordinator
    ("clock",)                                 ("clock", perf_counter_ns)
    ("level", ClientSpec, RequestMaker, Share) ("records", [RequestRecord, ...])  as they finish
    ("go", t0_ns)    its own clock             ("warm",)    warm-up done, ready for the common start
    ("drain",)       send nothing more         ("done", client_stats, error)  the level is over here
    ("stop",)        Ctrl-C: cancel in flight

Each finished request is handed to ``emit`` in the loop iteration it finished in (the records of one
iteration travel together), never held to the level's end: a worker killed mid-level loses only the
requests it had in flight. Its own LoopMonitor runs through the measured part, so each worker's lag, late
wake-ups and CPU are judged on their own (monitor.validity).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from servelab.bench.client import StreamClient
from servelab.bench.maker import RequestMaker
from servelab.bench.monitor import LoopMonitor
from servelab.bench.shares import MEASURE, RAMP, Share
from servelab.results.records import RequestRecord

Emit = Callable[[tuple], None]


@dataclass(frozen=True, kw_only=True)
class ClientSpec:
    """How a worker's StreamClient talks to the target (the credential travels to the worker, never stored)."""

    url: str
    api_key: str | None = field(default=None, repr=False)
    authorization: str | None = field(default=None, repr=False)
    secrets: tuple[str, ...] = field(default=(), repr=False)
    stall_timeout_s: float = 120.0
    keep_alive: bool = True
    deadline_s: float = 1800.0
    max_line_bytes: int = 8 << 20
    max_body_bytes: int = 256 << 20
    follow_redirects: bool = False

    def client(self) -> StreamClient:
        return StreamClient(
            self.url,
            self.api_key,
            stall_timeout_s=self.stall_timeout_s,
            keep_alive=self.keep_alive,
            deadline_s=self.deadline_s,
            max_line_bytes=self.max_line_bytes,
            max_body_bytes=self.max_body_bytes,
            authorization=self.authorization,
            secrets=self.secrets,
            follow_redirects=self.follow_redirects,
        )


class WorkerCore:
    """Runs in the worker's event loop; ``handle`` each message from the coordinator in that loop."""

    def __init__(self, emit: Emit) -> None:
        self._emit = emit
        self._batch: list[RequestRecord] = []
        self._stopped = self._draining = False
        self._go: asyncio.Future[int] | None = None
        self._inflight: set[asyncio.Task] = set()
        self.level_task: asyncio.Task | None = None

    def handle(self, message: tuple) -> None:
        kind = message[0]
        if kind == "clock":
            self._emit(("clock", time.perf_counter_ns()))
        elif kind == "level":
            self._stopped = self._draining = False
            self._go = asyncio.get_running_loop().create_future()
            self.level_task = asyncio.ensure_future(self._level(*message[1:]))
        elif kind == "go" and self._go is not None and not self._go.done():
            self._go.set_result(int(message[1]))
        elif kind == "drain":
            self._draining = True
        elif kind == "stop":
            self.stop()

    def stop(self) -> None:
        """Send nothing more; cancel what is in flight (those come back as ``cancelled`` records)."""
        self._stopped = self._draining = True
        if self._go is not None and not self._go.done():
            self._go.cancel()
        for task in list(self._inflight):
            task.cancel()

    @property
    def draining(self) -> bool:
        return self._draining

    def _record(self, record: RequestRecord) -> None:
        if not self._batch:
            asyncio.get_running_loop().call_soon(self._flush)
        self._batch.append(record)

    def _flush(self) -> None:
        if self._batch:
            batch, self._batch = self._batch, []
            self._emit(("records", batch))

    def _say(self, message: tuple) -> None:
        self._flush()  # every record before the message that follows it
        self._emit(message)

    async def _level(self, spec: ClientSpec, make: RequestMaker, share: Share) -> None:
        stats: dict[str, Any] = {}
        error = None
        try:
            async with spec.client() as client:
                await self._warmup(client, make, share)
                self._say(("warm",))
                t0 = await self._start_time()
                if t0 is not None and not share.idle:  # an idle share (c < N) is not judged
                    monitor = LoopMonitor()
                    monitor.start()
                    await (
                        self._open(client, make, share, t0)
                        if share.open_loop
                        else self._closed(client, make, share, t0)
                    )
                    stats = await monitor.stop()
        except Exception as exc:  # a bug: said to the coordinator, which marks the level
            error = f"{type(exc).__name__}: {exc}"
        self._say(("done", stats, error))

    async def _start_time(self) -> int | None:
        if self._go is None or self._stopped:
            return None
        try:
            return await self._go
        except asyncio.CancelledError:
            if self._stopped:
                return None
            raise

    async def _send(
        self, client: StreamClient, make: RequestMaker, serial: int, phase: str, intended_ns: int | None
    ) -> None:
        task = asyncio.ensure_future(client.send(make(serial, phase, intended_ns)))
        self._inflight.add(task)
        try:
            record = await task  # a stop cancels the send itself, which ends as a `cancelled` record
        finally:
            self._inflight.discard(task)
        self._record(record)

    async def _warmup(self, client: StreamClient, make: RequestMaker, share: Share) -> None:
        queue = list(share.warmup)
        slots = max(1, share.slots)

        async def slot() -> None:
            while queue and not self._stopped:
                await self._send(client, make, queue.pop(0), "warmup", None)

        await asyncio.gather(*(slot() for _ in range(min(slots, len(queue)))))

    async def _closed(self, client: StreamClient, make: RequestMaker, share: Share, t0: int) -> None:
        """Each slot from its start (all at t0 without a ramp); a request taken before t0 + the ramp is the
        ramp's, after it the share's measured serials until its count or duration (from the ramp's end)."""
        await _until(t0)
        measured = share.serials()
        ramp_end = None if share.ramp_ns is None else t0 + share.ramp_ns
        ramp = share.ramp_serials(measured) if ramp_end is not None else None
        begin = t0 if ramp_end is None else ramp_end
        end_ns = None if share.duration_s is None else begin + int(share.duration_s * 1e9)

        def take() -> tuple[int, str] | None:
            now = time.perf_counter_ns()
            if ramp is not None and ramp_end is not None and now < ramp_end:
                return next(ramp), RAMP
            if end_ns is not None and now >= end_ns:
                return None
            serial = next(measured, None)
            return None if serial is None else (serial, MEASURE)

        async def slot(start_ns: int) -> None:
            if start_ns > t0:
                await _until(start_ns, self)
            while not self._draining and (job := take()) is not None:
                await self._send(client, make, job[0], job[1], None)

        starts = [t0 + offset for offset in share.starts_ns] or [t0] * share.slots
        await asyncio.gather(*(slot(start) for start in starts))

    async def _open(self, client: StreamClient, make: RequestMaker, share: Share, t0: int) -> None:
        pending = []
        for serial, offset, phase in share.arrivals:
            if self._draining:
                break
            intended = t0 + offset
            await _until(intended, self)
            if self._draining:
                break
            pending.append(asyncio.ensure_future(self._send(client, make, serial, phase, intended)))
        await asyncio.gather(*pending)


async def _until(t_ns: int, core: WorkerCore | None = None) -> None:
    """Sleep to ``t_ns`` (perf_counter_ns), then yield until it has passed (loop timers fire up to 1 ms
    early, as in level.run_open); a drain or stop while sleeping ends the wait (checked every 50 ms)."""
    while (delay := t_ns - time.perf_counter_ns()) > 0:
        if core is not None and core.draining:
            return
        await asyncio.sleep(min(delay, 50_000_000) / 1e9)
        if time.perf_counter_ns() >= t_ns - 1_000_000:
            break
    while time.perf_counter_ns() < t_ns:
        await asyncio.sleep(0)

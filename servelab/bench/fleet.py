"""The coordinator's side of a fleet of workers (bench --workers N / --ray): one level across them.

The level's load is split (shares.py), each worker sends its share from its own event loop, and every raw
record it finishes comes back at once, is mapped onto the coordinator's clock (clock.py) and goes through
the one `on_record` of the run: the coordinator is the store's only writer (sink.py) and the level's figures
are computed from the merged records (summary.summarize_level), never from per-worker summaries.

The level: every worker runs its warm-up, says "warm"; the coordinator picks a common start a moment ahead
(``START_LEAD_NS``) and sends it to each worker on that worker's own clock (a closed loop's ramp ends at
that start + R on every worker: one instant for the fleet); each says "done" with its
client stats (loop lag, late wake-ups, CPU) when its share is over. A worker that dies mid-level loses only
the requests it had in flight: what it finished is already here; the level is marked partial and not valid,
with the reason, and the others go on. A worker that says nothing for SILENT_S (its "alive" comes every
second: it was stopped, e.g. SIGSTOP, or its loop hangs) is killed and counts as lost the same way, named in
the level's reason, so a level never waits for it forever. A stop (Ctrl-C, a failed store) is sent to every
worker, which cancels what it has in flight (``cancelled`` records, kept like the rest).
"""

from __future__ import annotations

import asyncio
import functools
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from servelab.bench.clock import SHARED, ClockEstimate, level_bound
from servelab.bench.level import LevelState
from servelab.bench.maker import RequestMaker
from servelab.bench.monitor import validity
from servelab.bench.shares import Share
from servelab.bench.worker_core import ClientSpec
from servelab.results.records import RequestRecord

START_LEAD_NS = 100_000_000  # the common start: this long after the last worker said "warm"
# a worker silent this long (no "alive", no record) has stopped answering: killed, marked lost
SILENT_S = 10.0
STOP_GRACE_S = 15.0  # after a stop, how long a worker may take to cancel and report before it is killed


class Link(Protocol):
    """One worker as the coordinator sees it; the transport (a local process, a Ray actor) behind it."""

    index: int
    on_message: Callable[[tuple], None]
    on_death: Callable[[str], None]

    @property
    def alive(self) -> bool: ...
    def info(self) -> dict[str, Any]: ...
    def send(self, message: tuple) -> None: ...
    async def clock(self) -> ClockEstimate: ...
    def kill(self) -> None: ...


@dataclass(kw_only=True)
class WorkerReport:
    """One worker's part of one level."""

    index: int
    info: dict[str, Any]
    clock_before: ClockEstimate
    clock_after: ClockEstimate | None = None
    records: int = 0
    stats: dict[str, Any] = field(default_factory=dict)
    error: str | None = None  # a failure inside the worker
    died: str | None = None  # the worker was lost mid-level
    warm: asyncio.Event = field(default_factory=asyncio.Event)
    done: asyncio.Event = field(default_factory=asyncio.Event)
    heard: float = field(default_factory=time.monotonic)  # the last message from the worker

    @property
    def bound_ns(self) -> int:
        after = self.clock_after or self.clock_before
        return level_bound(self.clock_before, after)

    def to_json(self, valid: bool, why: str | None) -> dict[str, Any]:
        return {
            "worker": self.index,
            **self.info,
            "records": self.records,
            **self.stats,
            "clock_offset_ns": self.clock_before.offset_ns,
            "clock_bound_ms": self.bound_ns / 1e6,
            "clock_source": self.clock_before.source,
            "valid": valid,
            "invalid_reason": why,
            "error": self.error,
            "died": self.died,
        }


@dataclass(frozen=True)
class FleetOutcome:
    """What the runner needs of a level run across workers."""

    client: dict[str, Any]  # stored as the level's ``client``: per worker, and the fleet's worst
    valid: bool
    invalid_reason: str | None
    lost_worker: bool


def shift(record: RequestRecord, offset_ns: int) -> RequestRecord:
    """A worker's record on the coordinator's clock (in place)."""
    if offset_ns:
        record.sent_ns += offset_ns
        record.end_ns += offset_ns
        if record.intended_ns is not None:
            record.intended_ns += offset_ns
        if record.first_token_ns is not None:
            record.first_token_ns += offset_ns
        for k in range(len(record.chunk_ns)):
            record.chunk_ns[k] += offset_ns
    return record


class Merge:
    """Records of every worker into the level: each mapped onto the coordinator's clock, counted, handed on."""

    def __init__(self, state: LevelState, on_record: Callable[[RequestRecord], None]) -> None:
        self.state, self.on_record = state, on_record

    def accept(self, report: WorkerReport, batch: list[RequestRecord]) -> None:
        offset = report.clock_before.offset_ns
        for record in batch:
            shift(record, offset)
            report.records += 1
            self.state.count(record)
            self.on_record(record)


async def run_level(
    links: list[Link],
    spec: ClientSpec,
    make: RequestMaker,
    shares: list[Share],
    state: LevelState,
    on_record: Callable[[RequestRecord], None],
    stop_event: asyncio.Event,
) -> list[WorkerReport]:
    """One level across ``links`` (one share each); returns each worker's report."""
    clocks = await asyncio.gather(*(link.clock() for link in links))
    reports = [
        WorkerReport(index=link.index, info=link.info(), clock_before=c)
        for link, c in zip(links, clocks, strict=True)
    ]
    merge = Merge(state, on_record)
    drained = False

    def drain_all(kind: str) -> None:
        for link in links:
            if link.alive:
                link.send((kind,))

    def on_message(report: WorkerReport, message: tuple) -> None:
        nonlocal drained
        report.heard = time.monotonic()
        kind = message[0]
        if kind == "records":
            merge.accept(report, message[1])
            if not drained and state.stop.errors_exhausted(state.errors):
                drained = True
                drain_all("drain")
        elif kind == "warm":
            report.warm.set()
        elif kind == "done":
            report.stats, report.error = message[1], message[2]
            report.warm.set()
            report.done.set()

    def on_death(report: WorkerReport, reason: str) -> None:
        if not report.done.is_set():
            report.died = reason
        report.warm.set()
        report.done.set()

    for link, report, share in zip(links, reports, shares, strict=True):
        link.on_message = functools.partial(on_message, report)
        link.on_death = functools.partial(on_death, report)
        if not link.alive:
            on_death(report, "not running at the level's start")
            continue
        link.send(("level", spec, make, share))
    stopper = asyncio.ensure_future(_stop_on(stop_event, links, reports))
    watchdog = asyncio.ensure_future(_watch_silence(links, reports, silent_s()))
    try:
        await _all(report.warm for report in reports)
        t0 = time.perf_counter_ns() + START_LEAD_NS
        ramp_ns = next((s.ramp_ns for s in shares if s.ramp_ns is not None), None)
        state.start_ns = t0 + (ramp_ns or 0)  # the measured part starts: after a closed loop's ramp
        state.ramp_end_ns = None if ramp_ns is None else t0 + ramp_ns
        for link, report in zip(links, reports, strict=True):
            if link.alive:
                link.send(("go", report.clock_before.to_worker(t0)))
        await _all(report.done for report in reports)
    finally:
        stopper.cancel()
        watchdog.cancel()
    afters = await asyncio.gather(*(_clock_or_none(link) for link in links))
    for report, after in zip(reports, afters, strict=True):
        report.clock_after = after
    return reports


async def _stop_on(stop_event: asyncio.Event, links: list[Link], reports: list[WorkerReport]) -> None:
    """Ctrl-C: every worker stops; one that has not reported STOP_GRACE_S later is killed."""
    await stop_event.wait()
    for link in links:
        if link.alive:
            link.send(("stop",))
    await asyncio.sleep(STOP_GRACE_S)
    for link, report in zip(links, reports, strict=True):
        if not report.done.is_set():
            link.kill()


def silent_s() -> float:
    """`SILENT_S`, or ``SERVELAB_WORKER_SILENT_S`` when set to a positive number (tests shorten it)."""
    try:
        value = float(os.environ.get("SERVELAB_WORKER_SILENT_S") or SILENT_S)
    except ValueError:
        return SILENT_S
    return value if value > 0 else SILENT_S


async def _watch_silence(links: list[Link], reports: list[WorkerReport], limit_s: float) -> None:
    """A worker silent for ``limit_s`` while its share runs is killed and its report marked lost, at once."""
    while True:
        await asyncio.sleep(min(1.0, limit_s / 4))
        now = time.monotonic()
        for link, report in zip(links, reports, strict=True):
            if report.done.is_set() or now - report.heard <= limit_s:
                continue
            report.died = f"stopped answering: no word for {now - report.heard:.0f} s, killed"
            link.kill()
            report.warm.set()
            report.done.set()


async def _all(events) -> None:
    await asyncio.gather(*(event.wait() for event in events))


async def _clock_or_none(link: Link) -> ClockEstimate | None:
    if not link.alive:
        return None
    try:
        return await link.clock()
    except Exception:  # lost since: its "before" estimate stands, with its bound
        return None


def outcome(
    reports: list[WorkerReport], lag_limit_ms: float, cpu_limit: float, server_here: bool
) -> FleetOutcome:
    """Each worker judged on its own client stats; any invalid or lost worker marks the level."""
    workers, reasons = [], []
    for report in reports:
        valid, why = (
            (True, None) if not report.stats else validity(report.stats, lag_limit_ms, cpu_limit, server_here)
        )
        if report.died:
            valid, why = (
                False,
                f"worker {report.index} {_where(report)} was lost mid-level ({report.died}): its requests in flight are not in the level",
            )
        elif report.error:
            valid, why = False, f"worker {report.index} failed: {report.error}"
        if why:
            reasons.append(why if why.startswith("worker") else f"worker {report.index}: {why}")
        workers.append(report.to_json(valid, why))
    client = {
        **_worst(reports),
        "workers": workers,
        "clock_bound_ms": max(r.bound_ns for r in reports) / 1e6,
        "clock_source": _source(reports),
    }
    return FleetOutcome(client, not reasons, "; ".join(reasons) or None, any(r.died for r in reports))


def _where(report: WorkerReport) -> str:
    info = report.info
    return "(" + ", ".join(f"{k} {info[k]}" for k in ("node", "pid") if info.get(k) is not None) + ")"


def _worst(reports: list[WorkerReport]) -> dict[str, Any]:
    """The fleet's worst of each client figure (what the live view and older readers look at)."""
    out: dict[str, Any] = {}
    for key in (
        "wake_late_p50_ms",
        "wake_late_p99_ms",
        "lag_p50_ms",
        "lag_p99_ms",
        "lag_max_ms",
        "cpu_fraction",
    ):
        values = [r.stats[key] for r in reports if r.stats.get(key) is not None]
        out[key] = max(values) if values else None
    return out


def _source(reports: list[WorkerReport]) -> str:
    sources = {r.clock_before.source for r in reports}
    return SHARED if sources == {SHARED} else ", ".join(sorted(sources))

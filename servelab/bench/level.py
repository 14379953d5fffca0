"""Running one level: closed loop (N workers, each sends its next prompt when its previous one finishes)
or open loop (sends on a precomputed absolute schedule, whatever is in flight). With a ramp (bench/ramp.py)
the workers start one after another, or the schedule's first arrivals come closer and closer; the requests
sent during it have ``phase = "ramp"``.

Every finished request goes to ``on_record`` at once. ``stop_event`` set (Ctrl-C) stops new sends;
in-flight requests are cancelled by the caller and come back as ``cancelled`` records.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from servelab.bench.client import ClientRequest, StreamClient
from servelab.bench.ramp import closed_start_offsets_ns
from servelab.bench.schedule import StopRule
from servelab.results.records import RequestRecord


@dataclass(kw_only=True)
class LevelState:
    """Counters of a running level (shared by its workers and the progress display)."""

    warmup: int
    stop: StopRule
    next_index: int = 0
    measured_started: int = 0
    errors: int = 0
    done: int = 0
    output_tokens: int = 0
    start_ns: int | None = None  # first measured send (a fleet: its common start, after a closed-loop ramp)
    ramp_end_ns: int | None = None  # closed loop with a ramp: requests taken before this are the ramp's
    tasks: set[asyncio.Task] = field(default_factory=set)

    def elapsed_ns(self) -> int:
        return 0 if self.start_ns is None else max(0, time.perf_counter_ns() - self.start_ns)

    def take(self, stop_event: asyncio.Event) -> tuple[int, str] | None:
        """The next (index, phase), or None when the level is over."""
        if stop_event.is_set():
            return None
        index = self.next_index
        if index < self.warmup:
            self.next_index += 1
            return index, "warmup"
        if self.ramp_end_ns is not None and time.perf_counter_ns() < self.ramp_end_ns:
            self.next_index += 1
            return index, "ramp"
        if not self.stop.may_start(self.measured_started, self.elapsed_ns(), self.errors):
            return None
        if self.start_ns is None:
            self.start_ns = time.perf_counter_ns()
        self.next_index += 1
        self.measured_started += 1
        return index, "measure"

    def count(self, record: RequestRecord) -> None:
        self.done += 1
        if record.phase == "measure":
            self.errors += record.status != "ok"
            self.output_tokens += sum(record.chunk_tokens)


MakeRequest = Callable[[int, str, int | None], ClientRequest]  # (index, phase, intended_ns) -> request


async def run_closed(
    client: StreamClient,
    concurrency: int,
    state: LevelState,
    make: MakeRequest,
    on_record: Callable[[RequestRecord], None],
    stop_event: asyncio.Event,
    ramp_s: float = 0.0,
) -> None:
    """With ``ramp_s`` the workers start one after another (`ramp.closed_start_offsets_ns`), else all at once."""
    t0 = time.perf_counter_ns()
    starts_ns = closed_start_offsets_ns(concurrency, ramp_s) if ramp_s > 0 else []
    if ramp_s > 0:
        state.ramp_end_ns = t0 + round(ramp_s * 1e9)

    async def worker(k: int) -> None:
        delay = t0 + starts_ns[k] - time.perf_counter_ns() if starts_ns else 0
        if delay > 0 and await _stopped_within(stop_event, delay / 1e9):
            return
        while (job := state.take(stop_event)) is not None:
            record = await client.send(make(job[0], job[1], None))
            state.count(record)
            on_record(record)

    workers = [asyncio.ensure_future(worker(k)) for k in range(concurrency)]
    state.tasks.update(workers)
    _raise_first(await asyncio.gather(*workers, return_exceptions=True))


async def run_open(
    client: StreamClient,
    offsets_ns: Sequence[int],
    state: LevelState,
    make: MakeRequest,
    on_record: Callable[[RequestRecord], None],
    stop_event: asyncio.Event,
    ramp_count: int = 0,
) -> None:
    """Warm-up first (one at a time), then each request at t0 + offset, absolute; the first ``ramp_count``
    arrivals are the ramp's."""
    while state.next_index < state.warmup and not stop_event.is_set():
        record = await client.send(make(state.next_index, "warmup", None))
        state.next_index += 1
        state.count(record)
        on_record(record)
    t0 = time.perf_counter_ns()
    state.start_ns = t0
    pending: list[asyncio.Task] = []
    for position, offset in enumerate(offsets_ns):
        if stop_event.is_set() or state.stop.errors_exhausted(state.errors):
            break
        intended = t0 + offset
        delay = intended - time.perf_counter_ns()
        if delay > 0 and await _stopped_within(stop_event, delay / 1e9):
            break
        while time.perf_counter_ns() < intended:  # loop timers may fire up to 1 ms early (ms resolution)
            await asyncio.sleep(0)
        index = state.next_index
        state.next_index += 1
        phase = "ramp" if position < ramp_count else "measure"
        state.measured_started += phase == "measure"
        task = asyncio.ensure_future(_send_one(client, make(index, phase, intended), state, on_record))
        state.tasks.add(task)
        pending.append(task)
    _raise_first(await asyncio.gather(*pending, return_exceptions=True))


def _raise_first(results: list) -> None:
    """A worker that died is a bug (client.send never raises): said, not swallowed; cancels are Ctrl-C."""
    for result in results:
        if isinstance(result, Exception):
            raise result


async def _send_one(client: StreamClient, request: ClientRequest, state: LevelState, on_record) -> None:
    record = await client.send(request)
    state.count(record)
    on_record(record)


async def _stopped_within(stop_event: asyncio.Event, seconds: float) -> bool:
    """Sleep ``seconds`` unless ``stop_event`` is set first; True when it was."""
    try:
        await asyncio.wait_for(stop_event.wait(), timeout=seconds)
    except TimeoutError:
        return False
    return True

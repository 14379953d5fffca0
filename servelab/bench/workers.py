"""`servelab bench --workers N`: the level's load from N worker processes on this machine.

Each worker is ``python -m servelab.bench.worker_main`` with its own event loop, started by the coordinating
process at the run's start and stopped at its end, and pinned to a CPU of its own when there are enough
(one left for the coordinator: N + 1 CPUs in this process's affinity mask; else unpinned, and the level's
``client.workers[].cpu`` says so). They talk over a socketpair (bench/frames.py). A worker found dead at a
level's start is started again. Clocks: every process of one machine reads the same CLOCK_MONOTONIC through
perf_counter_ns, so a local worker's offset is 0 with bound 0 (clock.SHARED_CLOCK); the records still pass
through the per-worker offset that Ray workers need (fleet.Merge).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from servelab.bench import frames
from servelab.bench.clock import SHARED_CLOCK, ClockEstimate
from servelab.bench.config import BenchConfig
from servelab.bench.fleet import FleetOutcome, Link, outcome, run_level
from servelab.bench.level import LevelState
from servelab.bench.maker import RequestMaker
from servelab.bench.shares import split_closed, split_open
from servelab.bench.worker_core import ClientSpec
from servelab.errors import ConfigError, ServelabError
from servelab.results.records import RequestRecord

HELLO_TIMEOUT_S = 120.0  # a worker process importing servelab on a loaded machine
QUIT_TIMEOUT_S = 5.0


def _ignore(*_: object) -> None:
    return None


class LocalLink:
    """One worker process and its socket."""

    def __init__(self, index: int, cpu: int | None) -> None:
        self.index, self.cpu = index, cpu
        self.on_message: Callable[[tuple], None] = _ignore
        self.on_death: Callable[[str], None] = _ignore
        self.proc: subprocess.Popen | None = None
        self.pid: int | None = None
        self.nice: int | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._pump: asyncio.Task | None = None
        self._dead: str | None = None
        self._closing = False

    async def start(self) -> None:
        ours, theirs = socket.socketpair()
        self.proc = subprocess.Popen(worker_argv(theirs.fileno(), self.cpu), pass_fds=(theirs.fileno(),))
        theirs.close()
        reader, self._writer = await asyncio.open_connection(sock=ours)
        try:
            hello = await asyncio.wait_for(frames.read(reader), HELLO_TIMEOUT_S)
        except (TimeoutError, asyncio.IncompleteReadError) as exc:
            self.kill()
            raise ServelabError(
                f"bench worker {self.index} did not start ({type(exc).__name__}); "
                f"run `{sys.executable} -m servelab.bench.worker_main` to see why"
            ) from None
        self.pid, self.nice = hello[1], hello[3]
        self._pump = asyncio.ensure_future(self._read(reader))

    async def _read(self, reader: asyncio.StreamReader) -> None:
        try:
            while True:
                message = await frames.read(reader)
                self.on_message(message)  # looked up per message: each level sets its own
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            pass
        self._dead = self._exit_reason()
        if not self._closing:
            self.on_death(self._dead)

    def _exit_reason(self) -> str:
        code = None if self.proc is None else self.proc.wait()
        if code is not None and code < 0:
            return f"killed by {signal.Signals(-code).name}"
        return f"exited with status {code}"

    @property
    def alive(self) -> bool:
        return self._dead is None and self._writer is not None

    def info(self) -> dict[str, Any]:
        return {"pid": self.pid, "cpu": self.cpu, "nice": self.nice}

    def send(self, message: tuple) -> None:
        if self._writer is not None and self.alive:
            with contextlib.suppress(ConnectionError, RuntimeError):
                self._writer.write(frames.encode(message))

    async def clock(self) -> ClockEstimate:
        return SHARED_CLOCK  # one machine, one CLOCK_MONOTONIC

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()

    async def close(self) -> None:
        self._closing = True
        self.send(("quit",))
        if self.proc is not None:
            try:
                await asyncio.wait_for(asyncio.to_thread(self.proc.wait), QUIT_TIMEOUT_S)
            except TimeoutError:
                self.kill()
                await asyncio.to_thread(self.proc.wait)
        if self._pump is not None:
            await asyncio.gather(self._pump, return_exceptions=True)
        if self._writer is not None:
            self._writer.close()


def worker_argv(fd: int, cpu: int | None) -> list[str]:
    """The worker process's command line: this interpreter, importing the same servelab as this process
    (whatever the working directory or PYTHONPATH), on socket ``fd``, pinned to ``cpu`` when given."""
    root = str(Path(__file__).resolve().parents[2])
    boot = f"import sys; sys.path.insert(0, {root!r}); from servelab.bench.worker_main import main; sys.exit(main(sys.argv[1:]))"
    return [sys.executable, "-c", boot, str(fd), *([] if cpu is None else [str(cpu)])]


def worker_cpus(workers: int) -> list[int | None]:
    """A CPU of its own per worker when N + 1 are ours (the first left to the coordinator); else none."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < workers + 1:
        return [None] * workers
    return [cpus[k + 1] for k in range(workers)]


class Fleet:
    """N workers behind links; ``level(...)`` runs one level across them."""

    def __init__(self, links: list) -> None:
        self.links = links

    async def ensure_running(self) -> None:
        return None

    async def close(self) -> None:
        await asyncio.gather(*(link.close() for link in self.links), return_exceptions=True)

    async def level(
        self,
        config: BenchConfig,
        spec: ClientSpec,
        make: RequestMaker,
        slots: int,
        offsets: list[int] | None,
        state: LevelState,
        on_record: Callable[[RequestRecord], None],
        stop_event: asyncio.Event,
        server_here: bool,
        ramp_count: int = 0,
    ) -> FleetOutcome:
        """One level: closed loop at ``slots`` (ramped over ``config.ramp_s``), or open loop on ``offsets`` (the
        run's one seeded schedule, its first ``ramp_count`` arrivals the ramp's)."""
        await self.ensure_running()
        workers = len(self.links)
        if offsets is None:
            shares = split_closed(
                slots, workers, state.warmup, config.stop.requests, config.stop.duration_s, config.ramp_s
            )
        else:
            shares = split_open(offsets, workers, state.warmup, ramp_count)
        links: list[Link] = self.links
        reports = await run_level(links, spec, make, shares, state, on_record, stop_event)
        return outcome(reports, config.lag_limit_ms, config.cpu_limit, server_here)


class LocalFleet(Fleet):
    async def ensure_running(self) -> None:
        """A worker lost in an earlier level is started again (same index, same CPU)."""
        for k, link in enumerate(self.links):
            if not link.alive:
                await link.close()
                fresh = LocalLink(link.index, link.cpu)
                await fresh.start()
                self.links[k] = fresh


def preflight(config: BenchConfig) -> None:
    """Before the run is created: --ray needs Ray installed, and a HOST:PORT that something listens on
    (Ray's own connect retries for minutes). ConfigError, one line, otherwise."""
    if config.ray is None:
        return
    try:
        from servelab.bench.ray_workers import check_address
    except ImportError as exc:
        raise ConfigError(f"--ray needs Ray ({exc}): pip install 'servelab[ray]'") from None
    check_address(config.ray)


async def open_fleet(config: BenchConfig) -> Fleet | None:
    """The run's workers: None for the default single process."""
    if config.ray is not None:
        from servelab.bench.ray_workers import open_ray_fleet  # ray: only when asked for

        return await open_ray_fleet(config.ray, config.workers or 1)
    if config.workers is None:
        return None
    links = [LocalLink(k, cpu) for k, cpu in enumerate(worker_cpus(config.workers))]
    fleet = LocalFleet(links)
    try:
        await asyncio.gather(*(link.start() for link in links))
    except BaseException:
        for link in links:
            link.kill()
        raise
    return fleet

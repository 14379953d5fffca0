"""`servelab bench --ray ADDRESS --workers N`: the same workers as Ray actors across a cluster's nodes.

Each actor (one CPU each, spread over the nodes) runs bench/worker_core.py's `WorkerCore` in its own
event loop on a thread of its own; the coordinator sends it the level (workload included) through actor
calls and takes its messages back in batches as they come (``take``: whatever has finished, at once, or
after a short wait), so a lost node loses only what its workers had in flight or not yet taken. Nothing is
sent over a socket of our own: Ray's calls carry everything. A worker's monotonic clock is mapped onto the
coordinator's by an offset estimated from round trips before and after each level (clock.py); the bound is
recorded in the level. ``servelab`` must be importable on every node (installed there, as for any Ray job).

ADDRESS: ``auto`` (the cluster Ray finds: RAY_ADDRESS, or the one started on this machine), ``local`` (a
Ray started for this run, on this machine only), or ``HOST:PORT`` of a cluster's head.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import ray
from ray.exceptions import RayError

from servelab.bench.clock import ClockEstimate, from_round_trips
from servelab.bench.workers import Fleet
from servelab.errors import ConfigError

ROUND_TRIPS = 9  # per clock estimate; the shortest is used
TAKE_WAIT_S = 0.05  # a take() with nothing finished returns after this long
PLACE_TIMEOUT_S = 120.0  # the cluster placing the actors (a cold node imports servelab)


class _Worker:
    """A worker on a Ray node: WorkerCore in its own loop thread; ``take`` blocks one of the actor's threads."""

    def __init__(self) -> None:
        from servelab.bench.worker_core import WorkerCore

        self._outbox: queue.SimpleQueue[tuple] = queue.SimpleQueue()
        self._loop = _new_loop()
        self._core = WorkerCore(self._outbox.put)
        threading.Thread(target=self._loop.run_forever, name="servelab-ray-worker", daemon=True).start()

    def info(self) -> dict[str, Any]:
        node = ray.get_runtime_context().get_node_id()
        return {"node": node[:12], "host": socket.gethostname(), "pid": os.getpid()}

    def clock(self) -> int:
        return time.perf_counter_ns()

    def command(self, message: tuple) -> None:
        self._loop.call_soon_threadsafe(self._core.handle, message)

    def take(self, wait_s: float) -> list[tuple]:
        try:
            out = [self._outbox.get(timeout=wait_s)]
        except queue.Empty:
            return []
        while True:
            try:
                out.append(self._outbox.get_nowait())
            except queue.Empty:
                return out


RayWorker = ray.remote(_Worker)


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def _ignore(*_: object) -> None:
    return None


class RayLink:
    """One actor as a fleet link (fleet.Link)."""

    def __init__(self, index: int, actor: Any, info: dict[str, Any]) -> None:
        self.index, self.actor, self._info = index, actor, info
        self.on_message: Callable[[tuple], None] = _ignore
        self.on_death: Callable[[str], None] = _ignore
        self._dead: str | None = None
        self._closing = False
        self._pump = asyncio.ensure_future(self._poll())

    async def _poll(self) -> None:
        while not self._closing:
            try:
                messages = await self.actor.take.remote(TAKE_WAIT_S)
            except RayError as exc:
                self._dead = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
                if not self._closing:
                    self.on_death(self._dead)
                return
            for message in messages:
                self.on_message(message)

    @property
    def alive(self) -> bool:
        return self._dead is None

    def info(self) -> dict[str, Any]:
        return dict(self._info)

    def send(self, message: tuple) -> None:
        if self.alive:
            self.actor.command.remote(message)

    async def clock(self) -> ClockEstimate:
        trips = []
        for _ in range(ROUND_TRIPS):
            c0 = time.perf_counter_ns()
            worker_ns = await self.actor.clock.remote()
            trips.append((c0, int(worker_ns), time.perf_counter_ns()))
        return from_round_trips(trips)

    def kill(self) -> None:
        with contextlib.suppress(RayError):
            ray.kill(self.actor)

    async def close(self) -> None:
        self._closing = True
        self.send(("stop",))
        await asyncio.gather(self._pump, return_exceptions=True)
        self.kill()


class RayFleet(Fleet):
    async def ensure_running(self) -> None:
        """A worker lost in an earlier level (its node gone) is placed again where the cluster has room."""
        for k, link in enumerate(self.links):
            if not link.alive:
                (fresh,) = await _place([link.index])
                self.links[k] = fresh


async def _place(indexes: list[int]) -> list[RayLink]:
    options = RayWorker.options(num_cpus=1, max_concurrency=4, scheduling_strategy="SPREAD")
    actors: list[Any] = [options.remote() for _ in indexes]  # ray's stubs do not type actor methods
    try:
        infos = await asyncio.wait_for(asyncio.gather(*(a.info.remote() for a in actors)), PLACE_TIMEOUT_S)
    except (TimeoutError, RayError) as exc:
        for actor in actors:
            ray.kill(actor)
        raise ConfigError(f"the Ray cluster could not place {len(indexes)} bench worker(s) of 1 CPU each within "
                          f"{PLACE_TIMEOUT_S:g} s ({type(exc).__name__}): ask for fewer --workers or add nodes") from None  # fmt: skip
    return [RayLink(k, actor, info) for k, actor, info in zip(indexes, actors, infos, strict=True)]


async def open_ray_fleet(address: str, workers: int) -> RayFleet:
    """Connect to (or, for ``local``, start) Ray and place ``workers`` actors."""
    if not ray.is_initialized():
        try:
            ray.init(address=None if address == "local" else address, include_dashboard=False,
                     log_to_driver=False, configure_logging=False)  # fmt: skip
        except (ConnectionError, RuntimeError, ValueError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ConfigError(f"cannot reach Ray at --ray {address}: {first}") from None
    return RayFleet(await _place(list(range(workers))))

"""`servelab bench --ray ADDRESS --workers N`: the same workers as Ray actors across a cluster's nodes.

Each actor (one CPU each, spread over the nodes) runs bench/worker_core.py's `WorkerCore` in its own
event loop on a thread of its own; the coordinator sends it the level (workload included) through actor
calls and takes its messages back in batches as they come (``take``: what finished within 0.1 s), so a lost
node loses only what its workers had in flight or had not yet handed over (at most the last 0.1 s). Nothing is
sent over a socket of our own: Ray's calls carry everything. A worker's monotonic clock is mapped onto the
coordinator's by an offset estimated from round trips before and after each level (clock.py); the bound is
recorded in the level. ``servelab`` must be importable on every node (installed there, as for any Ray job).

ADDRESS: ``auto`` (the cluster Ray finds: RAY_ADDRESS, or the one started on this machine), ``local`` (a
Ray started for this run, on this machine only), or ``HOST:PORT`` of a cluster's head.
"""

from __future__ import annotations

import asyncio
import contextlib
import pickle
import queue
import socket
import subprocess
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
TAKE_WINDOW_S = 0.1  # a take() returns what the worker said within this long (a batch of records)
PLACE_TIMEOUT_S = 120.0  # the cluster placing the actors (a cold node imports servelab)


class _Worker:
    """A Ray actor holding one CPU of its node, and on that node the same worker process `--workers` starts
    (bench/worker_main.py, its own interpreter: Ray's threads in the actor never hold its event loop up).
    The actor relays: commands down the socketpair, the worker's messages back as pickled bodies that
    ``take`` hands over in batches. Its ``clock`` reads the node's CLOCK_MONOTONIC, the worker's own clock."""

    def __init__(self) -> None:
        from servelab.bench import frames
        from servelab.bench.workers import worker_argv

        ours, theirs = socket.socketpair()
        self._proc = subprocess.Popen(worker_argv(theirs.fileno(), None), pass_fds=(theirs.fileno(),))
        theirs.close()
        self._sock, self._send_lock = ours, threading.Lock()
        self._outbox: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        hello = frames.read_body_sync(ours)
        if hello is None:
            raise RuntimeError(f"the bench worker process did not start (exit status {self._proc.wait()})")
        _, self._pid, _, self._nice = pickle.loads(hello)
        self._gone: str | None = None
        threading.Thread(target=self._relay, name="servelab-ray-relay", daemon=True).start()

    def _relay(self) -> None:
        from servelab.bench import frames

        while (body := frames.read_body_sync(self._sock)) is not None:
            self._outbox.put(body)
        self._outbox.put(None)

    def info(self) -> dict[str, Any]:
        node = ray.get_runtime_context().get_node_id()
        return {"node": node[:12], "host": socket.gethostname(), "pid": self._pid, "nice": self._nice}

    def clock(self) -> int:
        return time.perf_counter_ns()

    def command(self, message: tuple) -> None:
        from servelab.bench import frames

        with self._send_lock:
            self._sock.sendall(frames.encode(message))

    def take(self, window_s: float) -> list[bytes]:
        """The worker's messages of the next ``window_s`` (a few calls a second, whatever the request rate);
        raises once the worker process is gone, so the coordinator counts it lost."""
        if self._gone is not None:
            raise RuntimeError(self._gone)
        deadline = time.monotonic() + window_s
        out: list[bytes] = []
        while (left := deadline - time.monotonic()) > 0:
            try:
                body = self._outbox.get(timeout=left)
            except queue.Empty:
                break
            if body is None:
                self._gone = f"the bench worker process exited with status {self._proc.wait()}"
                break
            out.append(body)
        return out

    def quit(self) -> None:
        with contextlib.suppress(OSError):
            self.command(("quit",))
        try:
            self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._proc.kill()


RayWorker = ray.remote(_Worker)


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
                bodies = await self.actor.take.remote(TAKE_WINDOW_S)
            except RayError as exc:
                self._dead = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
                if not self._closing:
                    self.on_death(self._dead)
                return
            for body in bodies:
                self.on_message(pickle.loads(body))  # our own worker's frames, carried by Ray

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
        await asyncio.gather(self._pump, return_exceptions=True)
        if self.alive:
            with contextlib.suppress(RayError):
                await self.actor.quit.remote()
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
        raise ConfigError(
            f"the Ray cluster could not place {len(indexes)} bench worker(s) of 1 CPU each within "
            f"{PLACE_TIMEOUT_S:g} s ({type(exc).__name__}): ask for fewer --workers or add nodes"
        ) from None
    return [RayLink(k, actor, info) for k, actor, info in zip(indexes, actors, infos, strict=True)]


CONNECT_TIMEOUT_S = 5.0


def check_address(address: str) -> None:
    """A HOST:PORT must accept a connection (the head's GCS port, 6379 unless `ray start --port` said else)."""
    if address in ("auto", "local") or "://" in address:
        return
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise ConfigError(
            f"bad --ray {address!r}: give auto, local or HOST:PORT of a Ray head (its GCS port)"
        )
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"no Ray head answers at --ray {address} ({type(exc).__name__}: {exc}); start one with "
            "`ray start --head` or give its address"
        ) from None


async def open_ray_fleet(address: str, workers: int) -> RayFleet:
    """Connect to (or, for ``local``, start) Ray and place ``workers`` actors."""
    if not ray.is_initialized():
        try:
            ray.init(
                address=None if address == "local" else address,
                include_dashboard=False,
                log_to_driver=False,
                configure_logging=False,
            )
        except (ConnectionError, RuntimeError, ValueError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ConfigError(f"cannot reach Ray at --ray {address}: {first}") from None
    return RayFleet(await _place(list(range(workers))))

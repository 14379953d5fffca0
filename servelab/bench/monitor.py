"""The client watching itself: event-loop lag and CPU per level, so a level where the client was the
bottleneck is marked invalid instead of reported as the server's speed.

Lag is measured as how long a freshly queued callback waits for the loop (a ticker yields once every
``interval_s`` and times the round): that is the delay a socket read that just arrived would see before
being stamped. Wake lateness is how much later than asked the ticker's own sleep ended: beyond the timer's
1 ms resolution it means the process was not given a CPU (an oversubscribed host), which delays every
stamp just the same. Ticking every millisecond also keeps the client from idling into a deep sleep: a VM can
take milliseconds to wake an idle process, which would land in every TTFT (measured on this project's CI
VM: TTFT p50 error 1-2 ms with a 10 ms tick, 0.7 ms with 1 ms). CPU is the process's CPU time over wall
time (1.0 = one core busy).
"""

from __future__ import annotations

import asyncio
import os
import time
from array import array

from servelab.bench.metrics import percentile


class LoopMonitor:
    def __init__(self, interval_s: float = 0.001) -> None:
        self.interval_s = interval_s
        self.lags_ns = array("q")
        self.oversleep_ns = array("q")
        self._task: asyncio.Task | None = None
        self._cpu0 = self._wall0 = 0.0

    def start(self) -> None:
        self._cpu0, self._wall0 = time.process_time(), time.perf_counter()
        self._task = asyncio.get_running_loop().create_task(self._tick())

    async def stop(self) -> dict:
        """Stop and return loop lag, timer wake lateness (percentiles, ms) and CPU fraction."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        wall = max(time.perf_counter() - self._wall0, 1e-9)
        lags = [x / 1e6 for x in self.lags_ns]
        oversleep = [x / 1e6 for x in self.oversleep_ns]
        return {
            "wake_late_p50_ms": percentile(oversleep, 50.0),
            "wake_late_p99_ms": percentile(oversleep, 99.0),
            "lag_p50_ms": percentile(lags, 50.0),
            "lag_p99_ms": percentile(lags, 99.0),
            "lag_max_ms": max(lags) if lags else None,
            "cpu_fraction": (time.process_time() - self._cpu0) / wall,
        }

    async def _tick(self) -> None:
        interval_ns = int(self.interval_s * 1e9)
        while True:
            before = time.perf_counter_ns()
            await asyncio.sleep(self.interval_s)
            t = time.perf_counter_ns()
            self.oversleep_ns.append(t - before - interval_ns)
            await asyncio.sleep(0)
            self.lags_ns.append(time.perf_counter_ns() - t)


TIMER_RESOLUTION_MS = 1.0
HOST_TOOK_CPU = (
    "the host took the CPU away from the client"  # the report's verdict tells the host from the server
)


def client_pinned() -> bool:
    """Whether this thread may run on fewer CPUs than the machine has (pinned: `taskset`, the demo, `advise
    --confirm`), so advice to pin it apart from the server would be advice already taken."""
    getter = getattr(os, "sched_getaffinity", None)
    return getter is not None and len(getter(0)) < (os.cpu_count() or 1)


def validity(
    client: dict, lag_limit_ms: float, cpu_limit: float, server_here: bool = False, pinned: bool = False
) -> tuple[bool, str | None]:
    """(valid, why not): invalid when the client's loop lag, its wake-ups or its CPU say it was the bottleneck.
    ``server_here``: the target is on this machine (a loopback URL), the usual reason the client lacked a CPU;
    ``pinned``: the client already runs on CPUs of its own, so the CPU was taken by something else."""
    late = client.get("wake_late_p99_ms")
    if late is not None and late > lag_limit_ms + TIMER_RESOLUTION_MS:
        if server_here and not pinned:
            todo = (
                "the server runs on this machine: pin the two to different CPUs (taskset -c) or bench from "
                "another machine"
            )
        else:
            todo = "other work ran on its CPU: rerun when the host is quieter, with more requests per level"
        return False, f"client wake-ups p99 {late:.2f} ms late: {HOST_TOOK_CPU} ({todo})"
    lag = client.get("lag_p99_ms")
    if lag is not None and lag > lag_limit_ms:
        return (
            False,
            f"client event-loop lag p99 {lag:.2f} ms > {lag_limit_ms:g} ms: the client was the bottleneck",
        )
    cpu = client.get("cpu_fraction") or 0.0
    if cpu > cpu_limit:
        return False, f"client CPU {cpu:.0%} of a core > {cpu_limit:.0%}: the client was the bottleneck"
    return True, None

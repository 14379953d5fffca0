"""Server and load generator on different CPUs, where this machine has two or more (the demo, `advise
--confirm`): the engine gets all but the last allowed CPU, the client (this process's bench) the last one.

Linux affinity is per thread and a child inherits the mask of the thread that starts it, so ``on_cpus`` sets
the calling thread's mask for a block (an engine started in it keeps the server's CPUs; the bench's threads,
made in it, keep the client's) and puts the old mask back after it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class CpuSplit:
    server: frozenset[int]
    client: frozenset[int]

    @property
    def line(self) -> str:
        return f"server on CPU {_ranges(self.server)}, client on CPU {_ranges(self.client)}"


def _ranges(cpus: frozenset[int]) -> str:
    return ",".join(map(str, sorted(cpus)))


def cpu_split() -> CpuSplit | None:
    """The split of the CPUs this process may use; None with fewer than two or where affinity is not settable."""
    getter = getattr(os, "sched_getaffinity", None)
    if getter is None or not hasattr(os, "sched_setaffinity"):
        return None
    cpus = sorted(getter(0))
    if len(cpus) < 2:
        return None
    return CpuSplit(frozenset(cpus[:-1]), frozenset(cpus[-1:]))


@contextlib.contextmanager
def on_cpus(cpus: frozenset[int] | None) -> Iterator[None]:
    """The calling thread (and what it starts) on ``cpus`` for the block; nothing changes for None."""
    if cpus is None:
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)

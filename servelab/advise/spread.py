"""Where the emulations run: here, in local processes (`--jobs N`), or on a Ray cluster (`--ray ADDRESS`).

A task is a chunk of fitting candidates, each with the figures its emulator prices steps at (a calibration
profile's, looked up here, so that workers need no profile store); a worker judges a chunk with one prompt pool
(judge.py `PromptPool`) and hands the `Judged` values back. The answer does not depend on where they ran: each
judgement is a pure function of its candidate and the setting.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass, replace
from typing import Protocol

from servelab.advise.candidates import GridPoint
from servelab.advise.judge import Judged, PromptPool, Setting, judge
from servelab.errors import ConfigError
from servelab.predict.roofline import AchievedRates
from servelab.sizing.types import Plan

MAX_JOBS = 256


@dataclass(frozen=True)
class Fixed:
    """A calibration's figures looked up once, as `Setting.effective` expects them (picklable)."""

    effective: AchievedRates | None

    def __call__(self, plan: Plan) -> AchievedRates | None:
        return self.effective


Task = tuple[GridPoint, AchievedRates | None]


def judge_chunk(setting: Setting, tasks: Sequence[Task]) -> list[Judged]:
    """A worker's share: each candidate judged at its figures, one prompt pool for them all."""
    pool = PromptPool()
    return [judge(point, replace(setting, rates=Fixed(effective)), pool) for point, effective in tasks]


class Runner(Protocol):
    """Judges chunks of candidates; yields each chunk's results as it finishes."""

    workers: int

    def run(self, setting: Setting, chunks: Sequence[Sequence[Task]]) -> Iterator[list[Judged]]: ...

    def close(self) -> None: ...


class Here:
    """In this process, one candidate at a time."""

    workers = 1

    def __init__(self) -> None:
        self.pool = PromptPool()

    def run(self, setting: Setting, chunks: Sequence[Sequence[Task]]) -> Iterator[list[Judged]]:
        for chunk in chunks:
            yield [judge(p, replace(setting, rates=Fixed(e)), self.pool) for p, e in chunk]

    def close(self) -> None:
        return None


class Processes:
    """`--jobs N` local processes (forked: the model and the plans are already in memory)."""

    def __init__(self, jobs: int) -> None:
        self.workers = jobs
        context = multiprocessing.get_context(
            "fork" if "fork" in multiprocessing.get_all_start_methods() else None
        )
        self.executor = ProcessPoolExecutor(max_workers=jobs, mp_context=context)

    def run(self, setting: Setting, chunks: Sequence[Sequence[Task]]) -> Iterator[list[Judged]]:
        pending = {self.executor.submit(judge_chunk, setting, list(c)) for c in chunks}
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                yield future.result()

    def close(self) -> None:
        self.executor.shutdown(cancel_futures=True)


class RayCluster:
    """`--ray ADDRESS`: each chunk a Ray task of one CPU (bench/ray_workers.py's addresses: auto, local,
    HOST:PORT); servelab must be importable on every node."""

    def __init__(self, address: str) -> None:
        try:
            import ray
        except ImportError:
            raise ConfigError("--ray needs Ray: pip install 'servelab[ray]'") from None
        from servelab.bench.ray_workers import check_address

        check_address(address)
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
        self.ray = ray
        self.workers = max(1, int(ray.cluster_resources().get("CPU", 1)))
        self.remote = ray.remote(num_cpus=1)(judge_chunk)

    def run(self, setting: Setting, chunks: Sequence[Sequence[Task]]) -> Iterator[list[Judged]]:
        shared = self.ray.put(setting)
        pending = [self.remote.remote(shared, list(c)) for c in chunks]
        while pending:
            done, pending = self.ray.wait(pending, num_returns=1)
            for ref in done:
                yield self.ray.get(ref)

    def close(self) -> None:
        return None


def runner(jobs: int = 1, ray_address: str | None = None) -> Runner:
    """The runner `--jobs` / `--ray` ask for (one process by default)."""
    if ray_address is not None:
        return RayCluster(ray_address)
    if not 1 <= jobs <= MAX_JOBS:
        raise ConfigError(f"--jobs {jobs}: give 1 to {MAX_JOBS} processes")
    return Here() if jobs == 1 else Processes(jobs)


def chunked(tasks: Sequence[Task], pieces: int) -> list[list[Task]]:
    """`tasks` in about `pieces` contiguous chunks (none empty)."""
    size = max(1, -(-len(tasks) // max(1, pieces)))
    return [list(tasks[i : i + size]) for i in range(0, len(tasks), size)]


Lookup = Callable[[Plan], AchievedRates | None] | None


def with_figures(points: Sequence[GridPoint], lookup: Lookup) -> list[Task]:
    """Each candidate with the calibration figures it is priced at (None: the plan's)."""
    return [(p, None if lookup is None else lookup(p.plan)) for p in points]


__all__ = ["Fixed", "Runner", "Task", "chunked", "judge_chunk", "runner", "with_figures"]

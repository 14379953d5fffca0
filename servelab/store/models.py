"""What the store gives back: frozen views of a stored run."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from servelab.results.level_key import Level
from servelab.results.records import RequestRecord
from servelab.results.run import RunMeta, TargetInfo
from servelab.results.stats import LevelStats, LevelSummary


@dataclass(frozen=True, kw_only=True)
class RunInfo:
    """One line of `servelab runs`."""

    id: str
    name: str | None
    created_ns: int  # wall clock, ns since the epoch
    finished_ns: int | None
    status: str  # "running", "finished" or "interrupted" (never finished and its process is gone)
    partial: bool
    engines: tuple[str, ...]
    request_count: int
    error_count: int
    workload: str | None

    @property
    def created_iso(self) -> str:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.created_ns // 1_000_000_000))


@dataclass(frozen=True)
class StoredTarget:
    index: int
    url: str
    engine: str
    info: TargetInfo


@dataclass(frozen=True)
class StoredLevel:
    """One repeat of one level as the bench stored it."""

    target_index: int
    repeat: int
    summary: LevelSummary

    @property
    def level(self) -> Level:
        return self.summary.stats.level


@dataclass(frozen=True)
class MetricsSnapshot:
    target_index: int
    level: str
    repeat: int
    moment: str  # "before" or "after"
    t_ns: int | None
    text: str  # the Prometheus exposition as returned by the server


@dataclass(frozen=True, kw_only=True)
class StoredRun:
    info: RunInfo
    meta: RunMeta
    summary: dict | None  # what `bench --json` printed (`BenchResult.to_json`); None until finished
    targets: tuple[StoredTarget, ...]
    levels: tuple[StoredLevel, ...]
    requests: tuple[RequestRecord, ...]
    samples: dict[str, list[dict]] = field(default_factory=dict)
    snapshots: tuple[MetricsSnapshot, ...] = ()
    # (target index, level) -> its statistics, repeats pooled; empty for runs stored before migration m002
    level_stats: dict[tuple[int, Level], LevelStats] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return self.info.id

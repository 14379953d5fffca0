"""What the store gives back: frozen views of a stored run."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from servelab.results.level_key import Level
from servelab.results.records import RequestRecord
from servelab.results.stats import LevelStats


@dataclass(frozen=True)
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
    info: dict  # version, model, effective config: never an API key


@dataclass(frozen=True)
class StoredLevel:
    """One repeat of one level as the bench stored it (its `LevelSummary.to_json()`)."""

    target_index: int
    level: str  # "c=4" or "r=2.5" (the store's spelling of a `Level`)
    repeat: int
    summary: dict

    @property
    def valid(self) -> bool:
        return self.summary.get("valid") is not False

    @property
    def invalid_reason(self) -> str | None:
        """Why the bench marked this repeat invalid (older runs spelt the key "why")."""
        reason = self.summary.get("invalid_reason") or self.summary.get("why")
        return None if reason is None else str(reason)


@dataclass(frozen=True)
class MetricsSnapshot:
    target_index: int
    level: str
    repeat: int
    moment: str  # "before" or "after"
    t_ns: int | None
    text: str  # the Prometheus exposition as returned by the server


@dataclass(frozen=True)
class StoredRun:
    info: RunInfo
    meta: dict  # name, servelab_version, client_host, workload, settings, targets, client_edge, *_anchor_ns
    summary: dict | None
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

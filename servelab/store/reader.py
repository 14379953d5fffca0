"""Reading runs back from the store's tables (called by `Store` under its lock)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from servelab.errors import StoreError
from servelab.results.level_key import Level
from servelab.results.run import RunMeta, TargetInfo
from servelab.results.stats import LevelStats, LevelSummary
from servelab.store import codec
from servelab.store.ids import like_prefix
from servelab.store.models import MetricsSnapshot, RunInfo, StoredLevel, StoredRun, StoredTarget

RUN_COLUMNS = "id, name, created_ns, finished_ns, status, partial, pid, host, meta"
AliveCheck = Callable[[int | None, str | None], bool]
T = TypeVar("T")


def _status(status: str, pid: int | None, host: str | None, alive: AliveCheck) -> str:
    if status == "running" and not alive(pid, host):
        return "interrupted"
    return status


def _run_info(db: sqlite3.Connection, row: tuple, alive: AliveCheck) -> RunInfo:
    run_id, name, created_ns, finished_ns, status, partial, pid, host, meta = row
    engines = tuple(
        e
        for (e,) in db.execute("SELECT engine FROM targets WHERE run_id = ? ORDER BY target_index", (run_id,))
    )
    total, errors = db.execute(
        "SELECT COUNT(*), COALESCE(SUM(status != 'ok'), 0) FROM requests WHERE run_id = ? AND phase = 'measure'",
        (run_id,),
    ).fetchone()
    workload = _document(run_id, "meta", meta, RunMeta.from_json).workload
    return RunInfo(
        id=run_id,
        name=name,
        created_ns=created_ns,
        finished_ns=finished_ns,
        status=_status(status, pid, host, alive),
        partial=bool(partial) or status == "running",
        engines=engines,
        request_count=total,
        error_count=errors,
        workload=None if workload is None else workload.kind,
    )


def list_runs(db: sqlite3.Connection, alive: AliveCheck) -> list[RunInfo]:
    rows = db.execute(f"SELECT {RUN_COLUMNS} FROM runs ORDER BY created_ns, id").fetchall()
    return [_run_info(db, row, alive) for row in rows]


def resolve(db: sqlite3.Connection, run_id: str, path: Path) -> str:
    matches = [
        r for (r,) in db.execute("SELECT id FROM runs WHERE id LIKE ? ESCAPE '\\'", (like_prefix(run_id),))
    ]
    if run_id in matches:
        return run_id
    if not matches:
        raise StoreError(f"no run {run_id!r} in {path}; list runs with `servelab runs`")
    if len(matches) > 1:
        shown = ", ".join(sorted(matches)[:5])
        raise StoreError(f"run id {run_id!r} is ambiguous in {path} ({shown}); give more of it")
    return matches[0]


def load_run(db: sqlite3.Connection, run_id: str, alive: AliveCheck) -> StoredRun:
    row = db.execute(f"SELECT {RUN_COLUMNS} FROM runs WHERE id = ?", (run_id,)).fetchone()
    (summary,) = db.execute("SELECT summary FROM runs WHERE id = ?", (run_id,)).fetchone()
    return StoredRun(
        info=_run_info(db, row, alive),
        meta=_document(run_id, "meta", row[-1], RunMeta.from_json),
        summary=None if summary is None else json.loads(summary),
        targets=_targets(db, run_id),
        levels=_levels(db, run_id),
        requests=tuple(codec.row_to_record(r) for r in db.execute(codec.SELECT_SQL, (run_id,))),
        samples=_samples(db, run_id),
        snapshots=_snapshots(db, run_id),
        level_stats=_level_stats(db, run_id),
    )


def _targets(db: sqlite3.Connection, run_id: str) -> tuple[StoredTarget, ...]:
    rows = db.execute(
        "SELECT target_index, url, engine, info FROM targets WHERE run_id = ? ORDER BY target_index",
        (run_id,),
    )
    return tuple(
        StoredTarget(i, url, engine, _document(run_id, "target info", info, TargetInfo.from_json))
        for i, url, engine, info in rows
    )


def _levels(db: sqlite3.Connection, run_id: str) -> tuple[StoredLevel, ...]:
    rows = db.execute(
        "SELECT target_index, level, repeat, summary FROM levels WHERE run_id = ? ORDER BY rowid", (run_id,)
    )
    return tuple(
        StoredLevel(t, rep, _document(run_id, f"level {level}", s, LevelSummary.from_json))
        for t, level, rep, s in rows
    )


def _level_stats(db: sqlite3.Connection, run_id: str) -> dict[tuple[int, Level], LevelStats]:
    rows = db.execute(
        "SELECT target_index, stats FROM level_stats WHERE run_id = ? ORDER BY rowid", (run_id,)
    )
    out = {}
    for target_index, text in rows:
        stats = _document(run_id, "level statistics", text, LevelStats.from_json)
        out[(target_index, stats.level)] = stats
    return out


def _document(run_id: str, what: str, text: str, read: Callable[[dict[str, Any]], T]) -> T:
    """A stored JSON document as its type (the shape migration m003 left every row in); StoreError if not."""
    try:
        return read(json.loads(text))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise StoreError(f"run {run_id}: its stored {what} cannot be read ({exc!r})") from exc


def _samples(db: sqlite3.Connection, run_id: str) -> dict[str, list[dict]]:
    samples: dict[str, list[dict]] = {}
    for kind, data in db.execute("SELECT kind, data FROM samples WHERE run_id = ? ORDER BY id", (run_id,)):
        samples.setdefault(kind, []).append(json.loads(data))
    return samples


def _snapshots(db: sqlite3.Connection, run_id: str) -> tuple[MetricsSnapshot, ...]:
    rows = db.execute(
        "SELECT target_index, level, repeat, moment, t_ns, text FROM metrics_snapshots WHERE run_id = ? ORDER BY id",
        (run_id,),
    )
    return tuple(MetricsSnapshot(*row) for row in rows)

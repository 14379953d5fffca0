"""Numbered schema migrations for the result store, applied in order and recorded in a `migrations` table.

Each migration is a function of a connection; its name is its identity. `migrate` applies the ones not yet
recorded, each in its own transaction, so opening an old database upgrades it and opening a current one is a
no-op. Never edit a released migration: add the next one.
"""

from __future__ import annotations

import json
import sqlite3
import time

from servelab.store import legacy


def m001_initial(db: sqlite3.Connection) -> None:
    db.execute(
        """CREATE TABLE runs (
    id TEXT PRIMARY KEY,
    name TEXT,
    created_ns INTEGER NOT NULL,
    finished_ns INTEGER,
    status TEXT NOT NULL,
    partial INTEGER NOT NULL,
    pid INTEGER,
    host TEXT,
    meta TEXT NOT NULL,
    summary TEXT
)"""
    )
    db.execute(
        """CREATE TABLE targets (
    run_id TEXT NOT NULL REFERENCES runs(id),
    target_index INTEGER NOT NULL,
    url TEXT NOT NULL,
    engine TEXT NOT NULL,
    info TEXT NOT NULL,
    PRIMARY KEY (run_id, target_index)
)"""
    )
    db.execute(
        """CREATE TABLE levels (
    run_id TEXT NOT NULL REFERENCES runs(id),
    target_index INTEGER NOT NULL,
    level TEXT NOT NULL,
    repeat INTEGER NOT NULL,
    summary TEXT NOT NULL,
    PRIMARY KEY (run_id, target_index, level, repeat)
)"""
    )
    db.execute(
        """CREATE TABLE requests (
    id INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs(id),
    target_index INTEGER NOT NULL,
    level TEXT NOT NULL,
    repeat INTEGER NOT NULL,
    request_index INTEGER NOT NULL,
    phase TEXT NOT NULL,
    status TEXT NOT NULL,
    sent_ns INTEGER NOT NULL,
    end_ns INTEGER NOT NULL,
    intended_ns INTEGER,
    first_token_ns INTEGER,
    error_kind TEXT,
    error TEXT,
    http_status INTEGER,
    prompt_tokens INTEGER,
    output_tokens INTEGER,
    tokens_source TEXT,
    max_tokens INTEGER,
    finish_reason TEXT,
    early_eos INTEGER NOT NULL,
    evicted INTEGER NOT NULL,
    cached_prompt_tokens INTEGER,
    chunk_ns BLOB NOT NULL,
    chunk_tokens BLOB NOT NULL,
    server_timings TEXT,
    extra TEXT
)"""
    )
    db.execute("CREATE INDEX requests_by_level ON requests (run_id, target_index, level, repeat)")
    db.execute(
        """CREATE TABLE samples (
    id INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs(id),
    kind TEXT NOT NULL,
    t_ns INTEGER,
    data TEXT NOT NULL
)"""
    )
    db.execute("CREATE INDEX samples_by_kind ON samples (run_id, kind, t_ns)")
    db.execute(
        """CREATE TABLE metrics_snapshots (
    id INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs(id),
    target_index INTEGER NOT NULL,
    level TEXT NOT NULL,
    repeat INTEGER NOT NULL,
    moment TEXT NOT NULL,
    t_ns INTEGER,
    text TEXT NOT NULL
)"""
    )


def m002_level_stats(db: sqlite3.Connection) -> None:
    """The statistics of each level, all its repeats pooled, as the bench computed them (`LevelStats`).
    Runs stored before this migration have no rows here; readers compute those from the requests."""
    db.execute(
        """CREATE TABLE level_stats (
    run_id TEXT NOT NULL REFERENCES runs(id),
    target_index INTEGER NOT NULL,
    level TEXT NOT NULL,
    stats TEXT NOT NULL,
    PRIMARY KEY (run_id, target_index, level)
)"""
    )


def m003_typed_run_document(db: sqlite3.Connection) -> None:
    """Every run's meta, target info and level summaries in the one shape `RunMeta`, `TargetInfo` and
    `LevelSummary` read (`legacy.py` says what older rows hold), so readers have no second spelling to try.
    A row that is not JSON is left as it is: reading its run says so (StoreError)."""
    predicted_runs = set()
    for run_id, text in db.execute("SELECT id, meta FROM runs").fetchall():
        if (meta := _loads(text)) is _UNREADABLE:
            continue
        normal = legacy.run_meta(meta)
        if normal["predicted"] is not None:
            predicted_runs.add(run_id)
        db.execute("UPDATE runs SET meta = ? WHERE id = ?", (json.dumps(normal), run_id))
    for run_id, index, text in db.execute("SELECT run_id, target_index, info FROM targets").fetchall():
        if (info := _loads(text)) is _UNREADABLE:
            continue
        normal = legacy.target_info(info, run_id in predicted_runs)
        db.execute(
            "UPDATE targets SET info = ? WHERE run_id = ? AND target_index = ?",
            (json.dumps(normal), run_id, index),
        )
    for rowid, level, text in db.execute("SELECT rowid, level, summary FROM levels").fetchall():
        if (summary := _loads(text)) is _UNREADABLE:
            continue
        normal = legacy.level_summary(summary, level)
        db.execute("UPDATE levels SET summary = ? WHERE rowid = ?", (json.dumps(normal), rowid))


_UNREADABLE = object()


def _loads(text: str) -> object:
    try:
        return json.loads(text)
    except (ValueError, RecursionError, TypeError):
        return _UNREADABLE


MIGRATIONS = (m001_initial, m002_level_stats, m003_typed_run_document)


def applied_migrations(db: sqlite3.Connection) -> list[str]:
    """The names of the migrations recorded in `db`, in the order they ran (none for a new file). Only reads."""
    if not db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'migrations'").fetchone():
        return []
    return [row[0] for row in db.execute("SELECT name FROM migrations ORDER BY applied_ns, name")]


def migrate(db: sqlite3.Connection) -> list[str]:
    """Apply every migration not yet recorded; return the names applied now. `db` must be in autocommit mode.

    Each runs under BEGIN IMMEDIATE (the write lock) and is checked again once the lock is held, so several
    processes opening one new store apply each migration exactly once; the others find it recorded."""
    applied = []
    for fn in MIGRATIONS:
        if fn.__name__ in applied_migrations(db):
            continue
        db.execute("BEGIN IMMEDIATE")
        try:
            db.execute(
                "CREATE TABLE IF NOT EXISTS migrations (name TEXT PRIMARY KEY, applied_ns INTEGER NOT NULL)"
            )
            # another process may have applied it while we waited for the lock
            if fn.__name__ in applied_migrations(db):
                db.execute("COMMIT")
                continue
            fn(db)
            db.execute(
                "INSERT INTO migrations (name, applied_ns) VALUES (?, ?)", (fn.__name__, time.time_ns())
            )
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
        applied.append(fn.__name__)
    return applied

"""Pins the result store's schema: a change here must come with a new numbered migration."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from servelab.results.run import RunMeta
from servelab.store import Store
from servelab.store.migrations import MIGRATIONS, applied_migrations, migrate

EXPECTED = {
    "level_stats": [
        "run_id TEXT NOT NULL PK1",
        "target_index INTEGER NOT NULL PK2",
        "level TEXT NOT NULL PK3",
        "stats TEXT NOT NULL",
    ],
    "levels": [
        "run_id TEXT NOT NULL PK1",
        "target_index INTEGER NOT NULL PK2",
        "level TEXT NOT NULL PK3",
        "repeat INTEGER NOT NULL PK4",
        "summary TEXT NOT NULL",
    ],
    "metrics_snapshots": [
        "id INTEGER PK1",
        "run_id TEXT NOT NULL",
        "target_index INTEGER NOT NULL",
        "level TEXT NOT NULL",
        "repeat INTEGER NOT NULL",
        "moment TEXT NOT NULL",
        "t_ns INTEGER",
        "text TEXT NOT NULL",
    ],
    "migrations": ["name TEXT PK1", "applied_ns INTEGER NOT NULL"],
    "requests": [
        "id INTEGER PK1",
        "run_id TEXT NOT NULL",
        "target_index INTEGER NOT NULL",
        "level TEXT NOT NULL",
        "repeat INTEGER NOT NULL",
        "request_index INTEGER NOT NULL",
        "phase TEXT NOT NULL",
        "status TEXT NOT NULL",
        "sent_ns INTEGER NOT NULL",
        "end_ns INTEGER NOT NULL",
        "intended_ns INTEGER",
        "first_token_ns INTEGER",
        "error_kind TEXT",
        "error TEXT",
        "http_status INTEGER",
        "prompt_tokens INTEGER",
        "output_tokens INTEGER",
        "tokens_source TEXT",
        "max_tokens INTEGER",
        "finish_reason TEXT",
        "early_eos INTEGER NOT NULL",
        "evicted INTEGER NOT NULL",
        "cached_prompt_tokens INTEGER",
        "chunk_ns BLOB NOT NULL",
        "chunk_tokens BLOB NOT NULL",
        "server_timings TEXT",
        "extra TEXT",
    ],
    "runs": [
        "id TEXT PK1",
        "name TEXT",
        "created_ns INTEGER NOT NULL",
        "finished_ns INTEGER",
        "status TEXT NOT NULL",
        "partial INTEGER NOT NULL",
        "pid INTEGER",
        "host TEXT",
        "meta TEXT NOT NULL",
        "summary TEXT",
    ],
    "samples": [
        "id INTEGER PK1",
        "run_id TEXT NOT NULL",
        "kind TEXT NOT NULL",
        "t_ns INTEGER",
        "data TEXT NOT NULL",
    ],
    "targets": [
        "run_id TEXT NOT NULL PK1",
        "target_index INTEGER NOT NULL PK2",
        "url TEXT NOT NULL",
        "engine TEXT NOT NULL",
        "info TEXT NOT NULL",
    ],
}
EXPECTED_INDEXES = {("requests_by_level", "requests"), ("samples_by_kind", "samples")}


def _schema(db: sqlite3.Connection) -> dict[str, list[str]]:
    tables = [t for (t,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
    schema = {}
    for table in tables:
        schema[table] = [
            f"{name} {type_}" + (" NOT NULL" if notnull else "") + (f" PK{pk}" if pk else "")
            for _cid, name, type_, notnull, _default, pk in db.execute(f"PRAGMA table_info({table})")
        ]
    return schema


def test_schema_is_pinned(tmp_path: Path) -> None:
    Store.open(tmp_path / "runs.db").close()
    db = sqlite3.connect(tmp_path / "runs.db")
    assert _schema(db) == EXPECTED
    indexes = set(
        db.execute("SELECT name, tbl_name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL")
    )
    assert indexes == EXPECTED_INDEXES


def test_every_migration_is_recorded_once_and_reopening_is_a_no_op(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    Store.open(path).close()
    with Store.open(path) as store:
        run_id = store.create_run(RunMeta(name="kept"))
    Store.open(path).close()
    db = sqlite3.connect(path, isolation_level=None)
    assert applied_migrations(db) == [fn.__name__ for fn in MIGRATIONS]
    assert migrate(db) == []
    assert db.execute("SELECT id FROM runs").fetchall() == [(run_id,)]


def test_a_store_from_before_level_stats_upgrades_and_keeps_its_runs(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("CREATE TABLE migrations (name TEXT PRIMARY KEY, applied_ns INTEGER NOT NULL)")
    for fn in MIGRATIONS[:1]:  # a store written by the first release: m001 only
        fn(db)
        db.execute("INSERT INTO migrations VALUES (?, 0)", (fn.__name__,))
    db.execute(
        "INSERT INTO runs (id, created_ns, status, partial, meta) VALUES ('old', 0, 'finished', 0, '{}')"
    )
    db.close()
    with Store.open(path) as store:
        run = store.load_run("old")
    assert run.level_stats == {} and run.levels == ()
    assert applied_migrations(sqlite3.connect(path)) == [fn.__name__ for fn in MIGRATIONS]


def test_a_failing_migration_leaves_nothing_behind(tmp_path: Path, monkeypatch) -> None:
    def m999_broken(db: sqlite3.Connection) -> None:
        db.execute("CREATE TABLE half_done (x INTEGER)")
        db.execute("CREATE TABLE runs (x INTEGER)")  # already exists: fails

    db = sqlite3.connect(tmp_path / "runs.db", isolation_level=None)
    migrate(db)
    monkeypatch.setattr("servelab.store.migrations.MIGRATIONS", (*MIGRATIONS, m999_broken))
    try:
        migrate(db)
    except sqlite3.OperationalError:
        pass
    else:  # pragma: no cover
        raise AssertionError("the broken migration should have raised")
    assert "half_done" not in _schema(db)
    assert "m999_broken" not in applied_migrations(db)

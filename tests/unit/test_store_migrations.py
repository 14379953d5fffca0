"""Pins the result store's schema: a change here must come with a new numbered migration."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from servelab.errors import StoreError
from servelab.results.level_key import Level
from servelab.results.run import RunMeta, RunWorkload, TargetInfo
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


OLD_LEVEL = {  # one repeat as the bench wrote it before typed statistics (commit 8f79bbc^), marked invalid
    "concurrency": 2,
    "requests": 4,
    "completed": 3,
    "errors": 1,
    "errors_by_kind": {"http_5xx": 1},
    "evictions": 0,
    "ttft_ms": {"n": 3, "mean": 12.0, "p50": 11.0, "p90": 14.0, "p95": 14.5, "p99": 14.9},
    "itl_ms": {"n": 0},
    "tokens": {
        "output": 48,
        "prompt": 96,
        "source": {"server": 3},
        "chunk_source": {},
        "mismatches": 0,
        "early_eos": 0,
    },
    "window": {"t0_ns": 10, "t1_ns": 2_000_000_010, "seconds": 2.0, "steady": True},
    "output_tok_s": 24.0,
    "total_tok_s": 72.0,
    "request_s": 1.5,
    "client": {"lag_p99_ms": 9.0},
    "valid": False,
    "why": "client lag",
}


def _store_before_m003(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("CREATE TABLE migrations (name TEXT PRIMARY KEY, applied_ns INTEGER NOT NULL)")
    for fn in MIGRATIONS[:2]:
        fn(db)
        db.execute("INSERT INTO migrations VALUES (?, 0)", (fn.__name__,))
    return db


def test_migration_m003_gives_old_rows_the_one_shape_readers_know(tmp_path: Path) -> None:
    db = _store_before_m003(tmp_path / "runs.db")
    meta = {
        "name": "old",
        "workload": {"name": "short", "input_tokens": 32},
        "settings": {"slo": {"ttft_ms": 500}},
    }
    predicted = {
        "workload": "long",
        "predicted": {
            "engine": "vllm",
            "model": "m",
            "gpu": "h100-sxm",
            "quant": "bf16",
            "effective": {"source": "plan"},
        },
    }
    for run_id, doc in (("m", meta), ("p", predicted)):
        db.execute(
            "INSERT INTO runs (id, created_ns, status, partial, meta) VALUES (?, 0, 'finished', 0, ?)",
            (run_id, json.dumps(doc)),
        )
    infos = (
        ("m", {"model": "m", "version": "b1", "effective": {"context_per_slot": 2048, "slots": 4}}),
        ("p", {"model": "m", "effective": {"context": 8192}}),
    )
    for run_id, info in infos:
        db.execute("INSERT INTO targets VALUES (?, 0, 'http://x', 'llamacpp', ?)", (run_id, json.dumps(info)))
    db.execute("INSERT INTO levels VALUES ('m', 0, 'c=2', 0, ?)", (json.dumps(OLD_LEVEL),))
    db.close()
    with Store.open(tmp_path / "runs.db") as store:
        old, prediction = store.load_run("m"), store.load_run("p")
        assert [r.workload for r in store.list_runs()] == ["short", "long"]
    assert old.meta.workload == RunWorkload(kind="short", input_tokens=32)
    assert old.meta.slo == {"ttft_ms": 500} and old.meta.predicted is None and old.meta.client_edge is None
    assert old.targets[0].info == TargetInfo(version="b1", model="m", context_per_slot=2048)
    (level,) = old.levels
    assert level.level == Level.closed(2) and level.repeat == 0
    assert (level.summary.valid, level.summary.invalid_reason, level.summary.partial) == (
        False,
        "client lag",
        False,
    )
    stats = level.summary.stats
    assert (stats.requests, stats.completed, stats.errors, stats.repeats) == (4, 3, 1, 1)
    assert stats.ttft_ms.p50 == 11.0 and stats.ttft_ms.p99_9 is None and stats.itl_ms.n == 0
    assert stats.output_tok_s == 24.0 and stats.window is not None and stats.window.steady
    assert stats.duration_s == 0.0 and stats.error_examples == {}  # not recorded then: none
    assert prediction.meta.predicted is not None and prediction.meta.predicted.target.engine_version is None
    assert prediction.meta.predicted.effective == {"source": "plan"}
    assert prediction.targets[0].info == TargetInfo(model="m", context_per_slot=8192, predicted=True)


def test_a_stored_document_that_cannot_be_read_is_one_store_error(tmp_path: Path) -> None:
    with Store.open(tmp_path / "runs.db") as store:
        run_id = store.create_run(RunMeta(name="x"))
    db = sqlite3.connect(tmp_path / "runs.db", isolation_level=None)
    db.execute("UPDATE runs SET meta = ? WHERE id = ?", (json.dumps({"name": "x"}), run_id))  # after m003
    db.close()
    with (
        Store.open(tmp_path / "runs.db") as store,
        pytest.raises(StoreError, match=r"stored meta cannot be read"),
    ):
        store.load_run(run_id)


def test_a_row_m003_cannot_read_is_left_for_the_reader_to_name(tmp_path: Path) -> None:
    db = _store_before_m003(tmp_path / "runs.db")
    db.execute(
        "INSERT INTO runs (id, created_ns, status, partial, meta) VALUES ('bad', 0, 'finished', 0, '{oops')"
    )
    db.close()
    with (
        Store.open(tmp_path / "runs.db") as store,
        pytest.raises(StoreError, match=r"run bad: its stored meta"),
    ):
        store.load_run("bad")
    with closing(sqlite3.connect(tmp_path / "runs.db")) as db:
        assert db.execute("SELECT meta FROM runs").fetchone() == ("{oops",)

"""Many processes opening one new result store at the same moment all succeed; migrations run once.

Real processes (multiprocessing, spawn), released together by a barrier onto a path that does not exist
yet, so they race on creating the file, switching it to WAL and applying the migrations.
"""

from __future__ import annotations

import multiprocessing
import sqlite3
import traceback
from pathlib import Path

from servelab.results.run import RunMeta
from servelab.store import Store
from servelab.store.migrations import MIGRATIONS, applied_migrations

PROCESSES = 8
ROUNDS = 10


def _open_each_round(root: str, worker: int, barrier, results) -> None:  # runs in a child process
    for round_index in range(ROUNDS):
        barrier.wait(timeout=120)
        try:
            with Store.open(Path(root) / f"round-{round_index}" / "runs.db") as store:
                store.create_run(RunMeta(name=f"worker-{worker}"))
            results.put((round_index, worker, None))
        except Exception:
            results.put((round_index, worker, traceback.format_exc()))


def test_eight_processes_creating_one_store_at_once_all_succeed(tmp_path: Path) -> None:
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(PROCESSES)
    results = context.Queue()
    workers = [
        context.Process(target=_open_each_round, args=(str(tmp_path), i, barrier, results))
        for i in range(PROCESSES)
    ]
    for process in workers:
        process.start()
    outcomes = [results.get(timeout=300) for _ in range(PROCESSES * ROUNDS)]
    for process in workers:
        process.join(timeout=60)
    assert [p.exitcode for p in workers] == [0] * PROCESSES
    failures = [error for _, _, error in outcomes if error]
    assert not failures, failures[0]
    for round_index in range(ROUNDS):
        db = sqlite3.connect(tmp_path / f"round-{round_index}" / "runs.db")
        assert applied_migrations(db) == [fn.__name__ for fn in MIGRATIONS]  # each recorded exactly once
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        names = sorted(name for (name,) in db.execute("SELECT name FROM runs"))
        assert names == sorted(f"worker-{i}" for i in range(PROCESSES))
        db.close()

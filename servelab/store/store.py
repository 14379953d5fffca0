"""`Store`: the SQLite result store. Every write is its own transaction, so a crash loses nothing finished.

A write waits up to ``BUSY_TIMEOUT_S`` for another process's write lock, and tries ``WRITE_TRIES`` times
before it fails (``SERVELAB_STORE_BUSY_S`` shortens the wait, for tests). Opening a store replays the
journals (`journal.py`) that killed benches left beside it.

The database runs in WAL mode with ``synchronous=NORMAL``: a committed row survives the writing process being
killed. Runs start ``status="running", partial=1`` and only `finish_run` changes that, so a run whose process
died reads back as partial (status "interrupted"). sqlite3 errors become `StoreError`.
"""

from __future__ import annotations

import json
import logging
import os
import random
import socket
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil

from servelab import paths
from servelab.errors import StoreError
from servelab.redact import is_secret_name
from servelab.results.records import RequestRecord
from servelab.results.run import RunMeta, TargetInfo
from servelab.results.stats import LevelStats, LevelSummary
from servelab.store import codec, journal, reader
from servelab.store.ids import new_run_id
from servelab.store.migrations import migrate
from servelab.store.models import RunInfo, StoredRun

_log = logging.getLogger(__name__)  # the one warning of a damaged journal (stderr when nothing is set up)
BUSY_TIMEOUT_S = 30.0  # how long an open or a write waits for another process's lock before failing
WRITE_TRIES = 3  # a write whose lock wait ran out is tried again this many times in all


def _check_no_secret(what: str, value: object) -> None:
    """Refuse to store a dict that carries a credential under a credential's name (API keys never reach results)."""
    if isinstance(value, dict):
        for key, inner in value.items():
            if is_secret_name(key) and isinstance(inner, str) and inner:
                raise StoreError(f"refusing to store {what}: key {key!r} holds a credential; drop it first")
            _check_no_secret(what, inner)
    elif isinstance(value, list | tuple):
        for inner in value:
            _check_no_secret(what, inner)


class Store:
    """The result store. Open with `Store.open(path)`; use as a context manager or call `close()`."""

    def __init__(self, db: sqlite3.Connection, path: Path) -> None:
        self._db = db
        self.path = path
        self._lock = threading.Lock()
        self.busy_timeout_s = _busy_timeout_s()

    @classmethod
    def open(cls, path: Path | None = None, *, must_exist: bool = False) -> Store:
        """Open (creating unless `must_exist`) the store at `path`, default `paths.default_db_path()`.

        Commands that only read pass ``must_exist=True``: reading never leaves an empty store behind."""
        default = path is None
        path = paths.default_db_path() if path is None else Path(path)
        if must_exist and not path.is_file():
            if default:
                raise StoreError(
                    f"no runs stored yet (no result store at {path}): record one with `servelab bench URL`, "
                    "or pass --db PATH"
                )
            raise StoreError(
                f"no result store at {path}; run `servelab bench --db {path}` first or pass --db"
            )
        if path.exists() and not path.is_file():  # a FIFO, a device, a folder: SQLite would wait or misread
            raise StoreError(
                f"{path} is not a regular file, so not a result store; pass --db with a file's path"
            )
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create the directory for the result store {path}: {exc}") from exc
        with _mapped(path, "open"):
            db = sqlite3.connect(
                path, isolation_level=None, check_same_thread=False, timeout=_busy_timeout_s()
            )
            try:
                _retry_while_locked(lambda: db.execute("PRAGMA journal_mode=WAL"))
                db.execute("PRAGMA synchronous=NORMAL")
                db.execute("PRAGMA foreign_keys=ON")
                _retry_while_locked(lambda: migrate(db))
            except BaseException:
                db.close()
                raise
        store = cls(db, path)
        try:
            store.replay_journals()
        except BaseException:
            store.close()
            raise
        return store

    def close(self) -> None:
        with _mapped(self.path, "close"):
            self._db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _write(self, action: str) -> Iterator[sqlite3.Connection]:
        with self._lock, _mapped(self.path, action):
            self._begin()
            try:
                yield self._db
            except BaseException:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def _begin(self) -> None:
        """BEGIN IMMEDIATE (take the write lock), waiting out another process's lock up to `WRITE_TRIES` times."""
        for attempt in range(1, WRITE_TRIES + 1):
            try:
                self._db.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as exc:
                if not _is_lock_error(exc):
                    raise
                if attempt == WRITE_TRIES:
                    waits = f"{WRITE_TRIES} waits of {self.busy_timeout_s:g} s"
                    raise sqlite3.OperationalError(
                        f"{exc}: another process held its write lock through {waits}"
                    ) from exc

    # -- writing ----------------------------------------------------------------------------------------
    def create_run(self, meta: RunMeta) -> str:
        """Start a run (status running, partial until finished); return its time-sortable id."""
        document = meta.to_json()
        _check_no_secret("run meta", document)
        created_ns = time.time_ns()
        run_id = new_run_id(created_ns)
        with self._write("create run") as db:
            db.execute(
                "INSERT INTO runs (id, name, created_ns, status, partial, pid, host, meta)"
                " VALUES (?, ?, ?, 'running', 1, ?, ?, ?)",
                (run_id, meta.name, created_ns, os.getpid(), socket.gethostname(), _dumps(document)),
            )
        return run_id

    def add_target(self, run_id: str, index: int, url: str, engine: str, info: TargetInfo) -> None:
        document = info.to_json()
        _check_no_secret("target info", document)
        with self._write("add target") as db:
            db.execute(
                "INSERT OR REPLACE INTO targets (run_id, target_index, url, engine, info) VALUES (?, ?, ?, ?, ?)",
                (run_id, index, url, engine, _dumps(document)),
            )

    def add_request(self, run_id: str, record: RequestRecord) -> None:
        """Store one finished request in its own transaction."""
        self.add_requests(run_id, (record,))

    def add_requests(self, run_id: str, records: Iterable[RequestRecord]) -> None:
        """Store several finished requests in one transaction (for callers that batch)."""
        self.add_rows([codec.record_to_row(run_id, r) for r in records])

    def add_rows(self, rows: list[tuple]) -> None:
        """Store `requests` rows already encoded by `codec.record_to_row`, in one transaction."""
        with self._write("add request") as db:
            db.executemany(codec.INSERT_SQL, rows)

    def replay_journals(self) -> int:
        """Store the requests that dead benches left only in their journals; remove those journals.

        The stored requests of a run are a prefix of its journal, so the lines past that count are the ones
        missing: a line's number, not its place among the readable ones, says whether it is. A line that cannot be
        read is set aside (`journal.Orphan.set_aside`) and named in one warning per journal (a row of another run
        is one). A journal whose bench still runs (its lock held) is left alone. Returns the
        requests added."""
        added = 0
        for orphan in journal.orphaned(self.path):
            with self._write("replay journal") as db:
                if db.execute("SELECT 1 FROM runs WHERE id = ?", (orphan.run_id,)).fetchone() is None:
                    continue  # not this store's run: leave the file for a person to look at
                (stored,) = db.execute(
                    "SELECT COUNT(*) FROM requests WHERE run_id = ?", (orphan.run_id,)
                ).fetchone()
                rows = [row for number, row in orphan.rows if number >= stored]
                db.executemany(codec.INSERT_SQL, rows)
                added += len(rows)
            aside = orphan.set_aside(self.path)
            if aside is not None:
                count = len(orphan.rejected)
                _log.warning(
                    f"{count} line{'s' if count != 1 else ''} of the journal {orphan.path} could not be read "
                    f"(damaged by a crash or a disk error); kept aside in {aside}, the rest stored"
                )
            orphan.path.unlink(missing_ok=True)
        journal.remove_folder_if_empty(self.path)
        return added

    def add_level(self, run_id: str, target_index: int, repeat: int, summary: LevelSummary) -> None:
        """Keep one repeat of a level: its statistics and the bench's verdict on them."""
        document = summary.to_json()
        _check_no_secret("level summary", document)
        with self._write("add level") as db:
            db.execute(
                "INSERT OR REPLACE INTO levels (run_id, target_index, level, repeat, summary) VALUES (?, ?, ?, ?, ?)",
                (run_id, target_index, summary.stats.level.label, repeat, _dumps(document)),
            )

    def add_level_stats(self, run_id: str, target_index: int, stats: LevelStats) -> None:
        """Keep a level's statistics, all its repeats pooled (what report, compare and export read)."""
        with self._write("add level stats") as db:
            db.execute(
                "INSERT OR REPLACE INTO level_stats (run_id, target_index, level, stats) VALUES (?, ?, ?, ?)",
                (run_id, target_index, stats.level.label, _dumps(stats.to_json())),
            )

    def add_samples(self, run_id: str, kind: str, rows: list[dict]) -> None:
        """Append time-series rows (each a dict; its ``t_ns`` is indexed when present)."""
        values = [(run_id, kind, row.get("t_ns"), _dumps(row)) for row in rows]
        with self._write("add samples") as db:
            db.executemany("INSERT INTO samples (run_id, kind, t_ns, data) VALUES (?, ?, ?, ?)", values)

    def add_metrics_snapshot(
        self,
        run_id: str,
        target_index: int,
        level: str,
        repeat: int,
        moment: str,
        text: str,
        t_ns: int | None = None,
    ) -> None:
        """Keep a server's /metrics text taken `moment` ("before" / "after") a level."""
        with self._write("add metrics snapshot") as db:
            db.execute(
                "INSERT INTO metrics_snapshots (run_id, target_index, level, repeat, moment, t_ns, text)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (run_id, target_index, level, repeat, moment, t_ns, text),
            )

    def finish_run(self, run_id: str, *, partial: bool, summary: dict | None = None) -> None:
        with self._write("finish run") as db:
            cursor = db.execute(
                "UPDATE runs SET status = 'finished', partial = ?, finished_ns = ?, summary = ? WHERE id = ?",
                (int(partial), time.time_ns(), None if summary is None else _dumps(summary), run_id),
            )
            if cursor.rowcount == 0:
                raise StoreError(f"no run {run_id!r} in {self.path}; list runs with `servelab runs`")

    # -- reading ----------------------------------------------------------------------------------------
    def list_runs(self) -> list[RunInfo]:
        """Every run, oldest first."""
        with self._lock, _mapped(self.path, "list runs"):
            return reader.list_runs(self._db, _process_alive)

    def resolve(self, run_id: str) -> str:
        """The full id of the run `run_id` names (a whole id or a unique prefix)."""
        with self._lock, _mapped(self.path, "find run"):
            return reader.resolve(self._db, run_id, self.path)

    def load_run(self, run_id: str) -> StoredRun:
        """A whole run: meta, targets, levels, requests (as RequestRecord), samples, /metrics snapshots."""
        full_id = self.resolve(run_id)
        with self._lock, _mapped(self.path, "load run"):
            return reader.load_run(self._db, full_id, _process_alive)


def _dumps(value: object) -> str:
    try:
        return json.dumps(value, default=_json_default)
    except (TypeError, ValueError) as exc:
        raise StoreError(f"cannot store a value as JSON: {exc}") from exc


def _json_default(value: object) -> object:
    if hasattr(value, "tolist"):  # numpy arrays/scalars, array.array
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def _process_alive(pid: int | None, host: str | None) -> bool:
    """Is the process that wrote a run still running? Unknown hosts are assumed alive."""
    if host != socket.gethostname():
        return True
    if pid is None:
        return False
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _retry_while_locked(step: Callable[[], object]) -> None:
    """Run `step`, again after a growing pause while SQLite says the database is locked or busy.

    The busy timeout covers ordinary lock waits, but SQLite fails at once, without calling the busy handler,
    in cases that several processes opening one new store hit together (switching the file to WAL while
    another connection holds it; a read that must become a write). Those locks are short, so retrying with a
    bounded, jittered backoff clears them; `step` must be safe to repeat."""
    deadline = time.monotonic() + _busy_timeout_s()
    pause_s = 0.005
    while True:
        try:
            step()
            return
        except sqlite3.OperationalError as exc:
            if not _is_lock_error(exc) or time.monotonic() + pause_s > deadline:
                raise
        time.sleep(pause_s * (0.5 + random.random()))  # jitter: racing openers don't retry in step
        pause_s = min(pause_s * 2, 0.25)


def _busy_timeout_s() -> float:
    """`BUSY_TIMEOUT_S`, or ``SERVELAB_STORE_BUSY_S`` when set (tests make lock failures quick with it)."""
    raw = os.environ.get("SERVELAB_STORE_BUSY_S")
    try:
        value = float(raw) if raw else BUSY_TIMEOUT_S
    except ValueError:
        raise StoreError(f"SERVELAB_STORE_BUSY_S must be a number of seconds, got {raw!r}") from None
    if not value > 0:
        raise StoreError(f"SERVELAB_STORE_BUSY_S must be more than 0 seconds, got {raw!r}")
    return value


def _is_lock_error(exc: sqlite3.OperationalError) -> bool:
    message = str(exc).lower()
    return "locked" in message or "busy" in message


@contextmanager
def _mapped(path: Path, action: str) -> Iterator[None]:
    try:
        yield
    except sqlite3.Error as exc:
        raise StoreError(f"result store {path}: {action} failed: {exc}") from exc

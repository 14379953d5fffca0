"""Finished requests on their way to the store: journaled at once, committed to SQLite by a writer thread.

`add` (in the event loop that measures) appends the record to the run's journal, one unbuffered line, and
queues it; a thread commits whatever has queued in one transaction, so a record is in SQLite a commit after
it finished and a store locked by another process never blocks the loop. A write that still fails after
the store's own retries is kept: `error` says so, the records stay in the journal (`Store.open` replays them).
Whatever fails in the writer (a store error, or any surprise: a bug, a value the store refuses) sets `error`
and stops it; the journal is removed only when every record queued was committed, so a writer that died
leaves the run stopped with its records in the journal, never "finished" with records missing.
`blocked_s` tells the runner how long the writer was held up during a level. `later` queues a level-end write
(summary, samples, snapshots) behind the records, so the next level never waits for a locked store.
"""

from __future__ import annotations

import asyncio
import functools
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from servelab.errors import StoreError
from servelab.results.records import RequestRecord
from servelab.store import codec
from servelab.store.journal import Journal, journal_path

BATCH_MAX = 1000  # rows per transaction when the writer has fallen behind
NOTICE_AFTER_S = 1.0  # run end: say why we wait once the last writes take longer than this
_DONE = object()  # the end of the queue: not None, which _drain uses for "no item taken yet"


class RecordSink:
    def __init__(self, store: Any | None, run_id: str | None) -> None:
        self.store: Any = store
        self.run_id = run_id or ""
        self.error: StoreError | None = None
        self.journal = Journal(journal_path(store.path, self.run_id)) if store is not None else None
        self._queue: queue.SimpleQueue[object] = queue.SimpleQueue()  # rows, level-end writes, then _DONE
        self._write_since: float | None = None  # monotonic start of the write in progress
        self._window_start = time.monotonic()
        self._longest_s = 0.0
        self._queued = 0  # records queued for SQLite
        self._committed = 0  # records the writer committed
        self._thread = threading.Thread(target=self._drain, name="servelab-store-writer", daemon=True)
        if self.journal is not None:
            self._thread.start()

    def add(self, record: RequestRecord) -> None:
        if self.journal is None:
            return
        try:
            row = codec.record_to_row(self.run_id, record)
        except Exception as exc:  # a bug: the record cannot be kept, so the run must not go on as if it were
            self.error = self.error or StoreError(
                f"cannot encode a finished request for the store ({type(exc).__name__}: {exc}); the run stopped"
            )
            return
        try:
            self.journal.append(row)
        except StoreError as exc:  # the writer still stores it; the run stops, since a kill would lose it now
            self.error = self.error or StoreError(
                f"{exc}; the run stopped, its finished requests are in the store"
            )
        self._queued += 1
        self._queue.put(row)

    def later(self, write: Callable[[], object]) -> None:
        """A level-end write (its summary, samples, snapshots) done by the writer thread after the records queued
        before it, so a locked store never holds up the next level. Without a store, nothing to do."""
        if self.journal is None:
            return
        self._queue.put(write)

    def window(self) -> None:
        """Start measuring how long the writer is held up (at a level's start)."""
        self._window_start, self._longest_s = time.monotonic(), 0.0

    def blocked_s(self) -> float:
        """The longest store write since `window()`, counting one still in progress."""
        since = self._write_since
        current = 0.0 if since is None else time.monotonic() - max(since, self._window_start)
        return max(self._longest_s, current)

    async def close(self, notice: Callable[[str], object] | None = None) -> None:
        """Wait for every queued record to be committed (or the writer to fail); drop the journal if all are.
        When that takes longer than NOTICE_AFTER_S (another process holds the store's lock), ``notice`` is
        told once, so a run that has finished its load does not look hung."""
        if self.journal is None:
            return
        self._queue.put(_DONE)
        await asyncio.to_thread(self._thread.join, NOTICE_AFTER_S)
        if self._thread.is_alive():
            if notice is not None:
                notice(
                    f"waiting for the result store {self.store.path} (another process holds its lock); "
                    f"every finished request is already in {self.journal.path}"
                )
            await asyncio.to_thread(self._thread.join)
        if self.error is None and self._committed != self._queued:  # cannot happen unless the writer died
            self.error = StoreError(
                f"the store's writer stopped with {self._queued - self._committed} finished requests not "
                f"stored; they are kept in {self.journal.path} (`servelab runs --db {self.store.path}` stores them)"
            )
        self.journal.close(remove=self.error is None)

    def _drain(self) -> None:
        try:
            self._drain_queue()
        except BaseException as exc:  # never a silent death: the run stops and keeps its journal
            self._failed(exc)

    def _drain_queue(self) -> None:
        item = self._queue.get()
        while item is not _DONE:
            if callable(item):  # a level-end write, in its place among the records
                if not self._write(item):
                    return
                item = self._queue.get()
                continue
            batch: list[Any] = [item]
            following: object = None  # what ended the batch: _DONE or a level-end write (None: nothing yet)
            while len(batch) < BATCH_MAX:
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is _DONE or callable(more):
                    following = more
                    break
                batch.append(more)
            if not self._write(functools.partial(self.store.add_rows, batch)):
                return
            self._committed += len(batch)
            item = self._queue.get() if following is None else following

    def _write(self, write: Callable[[], object]) -> bool:
        self._write_since = started = time.monotonic()
        try:
            write()
        except (
            Exception
        ) as exc:  # StoreError, or a surprise (a value SQLite refuses, a bug): never a silent stop
            self._failed(exc)
            return False
        finally:
            self._longest_s = max(self._longest_s, time.monotonic() - max(started, self._window_start))
            self._write_since = None
        return True

    def _failed(self, exc: BaseException) -> None:
        where = self.journal.path if self.journal is not None else "memory"
        what = (
            str(exc)
            if isinstance(exc, StoreError)
            else f"the store's writer failed ({type(exc).__name__}: {exc})"
        )
        self.error = StoreError(
            f"{what}; the finished requests not yet stored are kept in {where} "
            f"(`servelab runs --db {self.store.path}` stores them)"
        )

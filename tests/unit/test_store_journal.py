"""The journal's lines and their replay: BLOBs survive the round trip, a line cut by a kill is skipped,
only the lines past a run's stored requests are added, and a journal whose writer lives is left alone."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from pathlib import Path

from servelab.bench import sink as sink_module
from servelab.bench.sink import RecordSink
from servelab.results.run import RunMeta, TargetInfo
from servelab.store import Store, codec
from servelab.store.journal import Journal, decode_line, encode_row, journal_dir, journal_path
from tests.runs_factory import make_record


def _rows(run_id: str, n: int) -> list[tuple]:
    records = [make_record(0, "c=1", i, start_ns=i, ttft_ms=1, itl_ms=1, output_tokens=4) for i in range(n)]
    return [codec.record_to_row(run_id, r) for r in records]


def test_a_row_comes_back_from_its_line_blobs_included():
    (row,) = _rows("r", 1)
    assert any(isinstance(v, bytes) for v in row)
    assert decode_line(encode_row(row)) == row
    assert decode_line(encode_row(row)[:-9]) is None  # cut short by a kill mid-line


def test_replay_adds_only_the_lines_past_what_is_stored_and_removes_the_journal(tmp_path: Path):
    db = tmp_path / "runs.db"
    with Store.open(db) as store:
        run_id = store.create_run(RunMeta(name="killed"))
        store.add_target(run_id, 0, "http://127.0.0.1:9/v1", "sim", TargetInfo())
        rows = _rows(run_id, 5)
        store.add_rows(rows[:2])  # the writer thread got this far
    path = journal_path(db, run_id)
    path.parent.mkdir()
    path.write_bytes(b"".join(encode_row(r) for r in rows) + encode_row(rows[0])[:7])
    with Store.open(db) as store:
        requests = store.load_run(run_id).requests
    assert [r.request_index for r in requests] == [0, 1, 2, 3, 4]
    assert (
        requests[4].chunk_tokens
        == make_record(0, "c=1", 4, start_ns=4, ttft_ms=1, itl_ms=1, output_tokens=4).chunk_tokens
    )
    assert not journal_dir(db).exists()


def test_a_journal_whose_writer_still_holds_it_is_not_replayed(tmp_path: Path):
    db = tmp_path / "runs.db"
    with Store.open(db) as store:
        run_id = store.create_run(RunMeta(name="live"))
        live = Journal(journal_path(db, run_id))
        live.append(_rows(run_id, 1)[0])
        assert store.replay_journals() == 0
        assert len(store.load_run(run_id).requests) == 0
        live.close(remove=False)
        assert store.replay_journals() == 1
    with Store.open(db) as store:
        assert len(store.load_run(run_id).requests) == 1


def test_a_journal_that_cannot_be_written_stops_the_run_but_the_writer_still_stores_the_records(
    tmp_path: Path,
):
    db = tmp_path / "runs.db"
    with Store.open(db) as store:
        run_id = store.create_run(RunMeta(name="disk full"))
        sink = RecordSink(store, run_id)
        assert sink.journal is not None
        sink.journal._file.close()
        sink.journal._file = open("/dev/full", "wb", buffering=0)  # noqa: SIM115 - a real device: writes fail with ENOSPC
        for i in range(2):
            sink.add(make_record(0, "c=1", i, start_ns=i, ttft_ms=1, itl_ms=1, output_tokens=4))
        asyncio.run(sink.close())
        assert sink.error is not None and "No space left on device" in str(sink.error)
        assert len(store.load_run(run_id).requests) == 2


def test_the_run_end_taken_with_a_batch_ends_the_writer(tmp_path: Path):
    """Records and the run's end queued while the writer waits for a locked store: the writer takes the end with
    its next batch and stops (it used to read the end as "nothing taken yet" and wait forever: a run finished
    its load and never returned)."""
    db = tmp_path / "runs.db"
    with Store.open(db) as store:
        run_id = store.create_run(RunMeta(name="behind"))
        sink = RecordSink(store, run_id)
        holder = sqlite3.connect(db, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")  # another process's write lock: the writer's first batch waits
        sink.add(make_record(0, "c=1", 0, start_ns=0, ttft_ms=1, itl_ms=1, output_tokens=4))
        while sink._write_since is None:  # the writer is inside its write, held by the lock
            time.sleep(0.001)
        for i in (1, 2):
            sink.add(make_record(0, "c=1", i, start_ns=i, ttft_ms=1, itl_ms=1, output_tokens=4))
        closing = threading.Thread(target=asyncio.run, args=(sink.close(),), daemon=True)
        closing.start()  # queues the end behind the two records
        while sink._queue.qsize() < 3:
            time.sleep(0.001)
        holder.execute("ROLLBACK")
        closing.join(30)
        try:
            assert not closing.is_alive() and sink.error is None
        finally:
            if closing.is_alive():  # a writer that missed the end: let it and the test's executor go
                sink._queue.put(sink_module._DONE)
        assert len(store.load_run(run_id).requests) == 3

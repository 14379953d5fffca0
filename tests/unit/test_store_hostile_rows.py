"""The store's writer and its journal against hostile values (issue 26): a value SQLite would refuse never
stops the writer, a writer that fails anyway keeps the journal and says so, and a journal's replay reads it
as hostile input (every good line kept, bad lines set aside and named in one warning, never a traceback)."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import sqlite3
import threading
from pathlib import Path

import pytest

from servelab.bench.sink import RecordSink
from servelab.errors import StoreError
from servelab.results.run import RunMeta
from servelab.store import Store, codec
from servelab.store import journal as journal_module
from servelab.store.journal import encode_row, journal_dir, journal_path, rejected_path
from tests.runs_factory import make_record


def _record(i: int, **changes):
    record = make_record(0, "c=1", i, start_ns=i, ttft_ms=1, itl_ms=1, output_tokens=4)
    for name, value in changes.items():
        setattr(record, name, value)
    return record


@pytest.mark.parametrize(
    "changes",
    [
        {"finish_reason": "\ud800"},
        {"error": "HTTP 500: \udfff", "status": "error", "error_kind": "http_5xx"},
        {"finish_reason": "nul\x00inside"},
        {"max_tokens": 2**63},
        {"http_status": -(2**70)},
        {"server_timings": {"\ud800": "\udc00"}},
        {"error": "x" * 1_000_000, "status": "error", "error_kind": "http_5xx"},
        {"level": "c=\ud800"},
    ],
)
def test_a_value_sqlite_would_refuse_never_stops_the_writer(tmp_path: Path, changes):
    db = tmp_path / "runs.db"
    with Store.open(db) as store:
        run_id = store.create_run(RunMeta(name="hostile"))
        sink = RecordSink(store, run_id)
        sink.add(_record(0, **changes))
        sink.add(_record(1))
        asyncio.run(sink.close())
        assert sink.error is None
        assert len(store.load_run(run_id).requests) == 2
    assert not journal_dir(db).exists()


def test_a_writer_that_fails_anyway_keeps_the_journal_and_says_so(tmp_path: Path, monkeypatch):
    db = tmp_path / "runs.db"
    with Store.open(db) as store:
        run_id = store.create_run(RunMeta(name="bug"))

        def broken(rows):
            raise RuntimeError("a bug in the writer")

        monkeypatch.setattr(store, "add_rows", broken)  # a failure nothing in the store maps
        sink = RecordSink(store, run_id)
        for i in range(3):
            sink.add(_record(i))
        asyncio.run(sink.close())
        assert sink.error is not None and "RuntimeError: a bug in the writer" in str(sink.error)
        assert str(journal_path(db, run_id)) in str(sink.error)
        assert journal_path(db, run_id).read_bytes().count(b"\n") == 3
    with Store.open(db) as store:  # the next open stores them from the journal
        assert len(store.load_run(run_id).requests) == 3


def _good_lines(run_id: str, n: int) -> list[bytes]:
    return [encode_row(codec.record_to_row(run_id, _record(i))) for i in range(n)]


def _bad_lines(run_id: str) -> dict[str, bytes]:
    row = list(codec.record_to_row(run_id, _record(99)))
    wrong_type = list(row)
    wrong_type[1] = "zero"  # target_index
    bad_blob = json.loads(encode_row(tuple(row)))
    blob_at = next(i for i, v in enumerate(bad_blob) if isinstance(v, dict))
    bad_blob[blob_at] = {"b": "!!!not base64"}
    short_blob = list(row)
    short_blob[blob_at] = b"\x01\x02\x03"  # not a whole number of 8-byte stamps
    not_object = list(row)
    not_object[-1] = "[1, 2]"  # extra: JSON, but not an object
    return {
        "damaged": b'["' + run_id.encode() + b'", 0, "c=1", 0, 3,' + b"\x00\xff garbage\n",
        "list of objects": b'[{"x":1}]\n',
        "bad base64": json.dumps(bad_blob).encode() + b"\n",
        "wrong type": encode_row(tuple(wrong_type)),
        "short blob": encode_row(tuple(short_blob)),
        "extra not an object": encode_row(tuple(not_object)),
        "a number": b"17\n",
        "another run's row": encode_row(codec.record_to_row("another-run", _record(1))),
        "blob dict of a number": json.dumps([{"b": 5}] * len(row)).encode() + b"\n",
    }


@pytest.mark.parametrize("bad", list(_bad_lines("r")))
@pytest.mark.parametrize("stored", [0, 2])
def test_replay_keeps_every_good_line_around_a_bad_one(tmp_path: Path, caplog, bad: str, stored: int):
    db = tmp_path / "runs.db"
    with Store.open(db) as store:
        run_id = store.create_run(RunMeta(name="damaged"))
        good = _good_lines(run_id, 5)
        store.add_rows([codec.record_to_row(run_id, _record(i)) for i in range(stored)])
    path = journal_path(db, run_id)
    path.parent.mkdir()
    bad_line = _bad_lines(run_id)[bad]
    path.write_bytes(b"".join(good[:1]) + bad_line + b"".join(good[2:]))  # request 1's line damaged
    with caplog.at_level("WARNING"), Store.open(db) as store:
        requests = store.load_run(run_id).requests
    # stored 0: request 1 is lost (its line unreadable), and only it; stored 2: it was in SQLite already
    assert [r.request_index for r in requests] == ([0, 2, 3, 4] if stored == 0 else [0, 1, 2, 3, 4])
    assert rejected_path(db, run_id).read_bytes() == bad_line  # kept aside, as it was
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and str(rejected_path(db, run_id)) in warnings[0] and "1 line" in warnings[0]
    with Store.open(db) as store:  # and it is not replayed twice
        assert len(store.load_run(run_id).requests) == len(requests)


def test_a_journal_of_rows_with_unstorable_text_replays(tmp_path: Path):
    """A journal written before this guard (or by hand) holding a lone surrogate and a 2**63: stored escaped."""
    db = tmp_path / "runs.db"
    with Store.open(db) as store:
        run_id = store.create_run(RunMeta(name="old"))
    row = list(codec.record_to_row(run_id, _record(0)))
    row[1 + codec.COLUMNS.index("finish_reason")] = "\ud800"
    row[1 + codec.COLUMNS.index("max_tokens")] = 2**63
    path = journal_path(db, run_id)
    path.parent.mkdir()
    path.write_bytes(
        json.dumps([{"b": base64.b64encode(v).decode()} if isinstance(v, bytes) else v for v in row]).encode()
        + b"\n"
    )
    with Store.open(db) as store:
        (record,) = store.load_run(run_id).requests
    assert record.finish_reason == "\\ud800" and record.max_tokens is None


def test_the_store_opens_with_a_journal_that_is_all_garbage(tmp_path: Path):
    db = tmp_path / "runs.db"
    with Store.open(db) as store:
        run_id = store.create_run(RunMeta(name="garbage"))
    path = journal_path(db, run_id)
    path.parent.mkdir()
    path.write_bytes(b"\xff\xfe\x00" * 100 + b"\n[]\n{}\nnull\n")
    with Store.open(db) as store:
        assert store.load_run(run_id).requests == ()
    assert rejected_path(db, run_id).exists()
    with sqlite3.connect(db) as c:
        assert c.execute("SELECT count(*) FROM requests").fetchone() == (0,)


def test_a_fifo_named_like_a_journal_never_holds_the_open(tmp_path: Path, caplog):
    db = tmp_path / "runs.db"
    with Store.open(db) as store:
        run_id = store.create_run(RunMeta(name="fifo"))
    journal_dir(db).mkdir()
    os.mkfifo(journal_path(db, run_id))
    opened: list[int] = []

    def open_store() -> None:
        with Store.open(db) as store:
            opened.append(len(store.load_run(run_id).requests))

    worker = threading.Thread(target=open_store, daemon=True)
    with caplog.at_level("WARNING"):
        worker.start()
        worker.join(30)
    assert not worker.is_alive() and opened == [0]
    assert any("is not a regular file" in r.getMessage() for r in caplog.records)


def test_an_overlong_line_is_kept_aside_and_the_lines_after_it_replay(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(journal_module, "MAX_LINE_BYTES", 4096)
    db = tmp_path / "runs.db"
    with Store.open(db) as store:
        run_id = store.create_run(RunMeta(name="long line"))
    good = _good_lines(run_id, 3)
    assert all(len(line) < 4096 for line in good)
    path = journal_path(db, run_id)
    path.parent.mkdir()
    path.write_bytes(good[0] + b"[" + b"7," * 100_000 + b"7]\n" + good[2])  # request 1's line, overlong
    with Store.open(db) as store:
        assert [r.request_index for r in store.load_run(run_id).requests] == [0, 2]
    aside = rejected_path(db, run_id).read_bytes()
    assert aside.startswith(b"[7,7,") and b"cut: a line over 4096 bytes" in aside and len(aside) < 2000


def test_a_store_path_that_is_not_a_regular_file_is_one_clear_error(tmp_path: Path):
    fifo = tmp_path / "fifo.db"
    os.mkfifo(fifo)
    for path in (fifo, Path("/dev/zero"), tmp_path):
        with pytest.raises(StoreError, match="is not a regular file, so not a result store"):
            Store.open(path)


def test_a_record_with_a_bool_for_a_count_replays_from_its_journal(tmp_path: Path):
    db = tmp_path / "runs.db"
    with Store.open(db) as store:
        run_id = store.create_run(RunMeta(name="bool"))
    path = journal_path(db, run_id)
    path.parent.mkdir()
    path.write_bytes(encode_row(codec.record_to_row(run_id, _record(0, max_tokens=True))))
    with Store.open(db) as store:
        (record,) = store.load_run(run_id).requests
    assert record.max_tokens == 1 and not rejected_path(db, run_id).exists()

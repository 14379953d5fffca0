"""Text a store cannot hold as it is never takes a record off the books (issue 26).

A raw server (tests/answer_server.py) answers each request with hostile text in one field
(tests/hostile_answers.py: every field of a stream and of an error answer, each through lone surrogates, NULs,
escape sequences, bidi marks and an overlong value). Every request the server answered is a stored record,
the run is finished, no journal is left, and the run reads back; text that cannot be stored as UTF-8 is stored
escaped, and where it was the answer's content or finish reason the request counts as malformed.
"""

from __future__ import annotations

import re
import sqlite3

from servelab.cli.app import main
from servelab.store import Store
from servelab.store.journal import journal_dir
from tests.answer_server import answer_server, sse_head
from tests.hostile_answers import FIELDS, VALUES, case, hostile_answer

SENT = len(FIELDS) * len(VALUES)


def test_every_answered_request_is_stored_whatever_text_it_carried(capsys, tmp_path):
    db = tmp_path / "runs.db"
    with answer_server(lambda serial, path: hostile_answer(*case(serial))) as server:
        argv = [
            "bench",
            server.url,
            "--concurrency",
            "4",
            "--requests",
            str(SENT),
            "--warmup",
            "0",
            "--db",
            str(db),
            "--no-power",
            "--json",
        ]
        code = main(argv)
        answered = server.answered
        asked = {_request_id(head): case(serial) for serial, head in enumerate(server.heads, 1)}
    err = capsys.readouterr().err
    assert "Traceback" not in err and code == 0, err[-2000:]
    assert answered == SENT
    with sqlite3.connect(db) as c:
        (count,) = c.execute("SELECT count(*) FROM requests").fetchone()
        runs = [r for (r,) in c.execute("SELECT status FROM runs")]
        finishes = [
            f for (f,) in c.execute("SELECT finish_reason FROM requests WHERE finish_reason LIKE '%ud800%'")
        ]
    assert count == answered and runs == ["finished"]
    assert not journal_dir(db).exists()
    assert "\\ud800" in finishes  # stored escaped
    with Store.open(db) as store:
        (run,) = store.list_runs()
        records = store.load_run(run.id).requests
    assert len(records) == SENT
    for record in records:  # every stored text is valid UTF-8
        for text in (record.error, record.finish_reason):
            assert text is None or text.encode("utf-8")
    malformed = [r for r in records if r.finish_reason == "\\ud800"]
    assert malformed and all(r.error_kind == "malformed" for r in malformed)
    surrogate = re.compile("[\ud800-\udfff]")
    for record in records:  # the answer's own text or finish reason not valid Unicode: malformed, any size
        field, value = asked[record.request_id]
        if field in ("content", "reasoning_content", "text", "finish_reason") and surrogate.search(value):
            assert record.error_kind == "malformed", (field, value[:20], record.error)


def _request_id(head: bytes) -> str:
    line = next(line for line in head.split(b"\r\n") if line.lower().startswith(b"x-request-id:"))
    return line.split(b":", 1)[1].strip().decode()


def test_a_workload_max_tokens_no_store_can_hold_is_refused_before_any_load(capsys, tmp_path):
    workload = tmp_path / "w.jsonl"
    workload.write_text(
        '{"prompt": "hi", "max_tokens": 2}\n{"prompt": "hi", "max_tokens": 9223372036854775808}\n'
    )
    with answer_server(lambda serial, path: hostile_answer("content", "a")) as server:
        argv = [
            "bench",
            server.url,
            "--requests",
            "2",
            "--warmup",
            "0",
            "--workload",
            str(workload),
            "--db",
            str(tmp_path / "runs.db"),
            "--no-power",
        ]
        code = main(argv)
        posts = server.posts
    err = capsys.readouterr().err
    assert code == 2 and posts == 0 and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and "max_tokens" in err and str(workload) in err


def test_a_store_writer_that_dies_stops_the_run_with_exit_1_and_keeps_the_journal(
    capsys, tmp_path, monkeypatch
):
    db = tmp_path / "runs.db"

    def broken(self, rows):
        raise RuntimeError("a bug in the writer")

    monkeypatch.setattr(Store, "add_rows", broken)  # a failure nothing maps to StoreError
    with answer_server(lambda serial, path: hostile_answer("content", "a")) as server:
        argv = [
            "bench",
            server.url,
            "--concurrency",
            "2",
            "--requests",
            "6",
            "--warmup",
            "0",
            "--db",
            str(db),
            "--no-power",
        ]
        code = main(argv)
        answered = server.answered
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err
    assert "a bug in the writer" in err and ".journal" in err
    (journal,) = journal_dir(db).glob("*.jsonl")
    lines = journal.read_bytes().count(b"\n")
    assert lines >= max(1, answered)  # every answered request is kept (requests cancelled by the stop too)
    with sqlite3.connect(db) as c:
        assert [r for (r,) in c.execute("SELECT status FROM runs")] == ["running"]  # reads back interrupted
    monkeypatch.undo()
    with Store.open(db) as store:  # the next open stores what the journal kept
        (run,) = store.list_runs()
        assert len(store.load_run(run.id).requests) == lines


INVALID_HTTP = (
    sse_head(b"Transfer-Encoding: chunked\r\n")
    + b"zz\r\ndata: x\r\n0\r\n\r\n",  # a chunk size that is not hex
    b"HTTP/1.1 200 OK\r\nX-" + b"a" * 70_000 + b": 1\r\n\r\n",  # a header over aiohttp's limit
    sse_head(b"X-Nul: a\x00b\r\n") + b"data: [DONE]\n\n",  # a NUL in a header
)


def test_an_answer_that_is_not_valid_http_is_malformed_not_a_client_error(capsys, tmp_path):
    db = tmp_path / "runs.db"
    with answer_server(lambda serial, path: INVALID_HTTP[serial % len(INVALID_HTTP)]) as server:
        argv = [
            "bench",
            server.url,
            "--concurrency",
            "2",
            "--requests",
            "6",
            "--warmup",
            "0",
            "--db",
            str(db),
            "--no-power",
        ]
        code = main(argv)
        posts = server.posts
    assert code == 1 and "Traceback" not in capsys.readouterr().err
    with sqlite3.connect(db) as c:
        rows = c.execute("SELECT error_kind, error FROM requests").fetchall()
    assert len(rows) == posts == 6
    assert {kind for kind, _ in rows} == {"malformed"}
    assert all(message.startswith("not valid HTTP: ") for _, message in rows)

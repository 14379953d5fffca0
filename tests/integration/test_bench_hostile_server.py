"""A hostile server cannot take a request off the books, crash bench or verify, or make them wait forever.

Each case is served by tests/hostile_server.py (aiohttp on 127.0.0.1). For bench: every request the server
received is a stored record (ok, or an error kind with its message), the run is finished, the exit code is 0
and stderr holds no traceback. For the endpoint cases: one clear line and exit 1, or a normal run.
"""

from __future__ import annotations

import sqlite3

import pytest

from servelab.cli.app import main
from tests.hostile_server import hostile_server

SENT = 8


def bench(capsys, url: str, db, *extra: str) -> tuple[int, str]:
    argv = [
        "bench",
        url,
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
        *extra,
    ]
    code = main(argv)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, err


def stored(db) -> tuple[dict[tuple[str, str | None], int], list[str], list[str | None]]:
    with sqlite3.connect(db) as c:
        kinds = {
            (s, k): n
            for s, k, n in c.execute("SELECT status, error_kind, count(*) FROM requests GROUP BY 1, 2")
        }
        runs = [r for (r,) in c.execute("SELECT status FROM runs")]
        messages = [m for (m,) in c.execute("SELECT error FROM requests WHERE status = 'error'")]
    return kinds, runs, messages


@pytest.mark.parametrize(
    ("mode", "extra", "expected"),
    [
        ("huge_usage", (), {("ok", None): SENT // 2, ("error", "malformed"): SENT // 2}),
        ("list_finish", (), {("error", "malformed"): SENT}),
        ("nested", (), {("error", "malformed"): SENT}),
        ("bigint", (), {("error", "malformed"): SENT}),
        ("endless_line", ("--max-line-bytes", "100000"), {("error", "too_large"): SENT}),
        ("endless_line", ("--max-body-bytes", "200000"), {("error", "too_large"): SENT}),
        ("keepalive", ("--deadline", "1"), {("error", "deadline"): SENT}),
    ],
)
def test_every_request_sent_is_a_stored_record(capsys, tmp_path, mode, extra, expected):
    db = tmp_path / "runs.db"
    with hostile_server(mode) as server:
        code, err = bench(capsys, server.url, db, *extra)
        sent = server.posts
    kinds, runs, messages = stored(db)
    any_ok = ("ok", None) in kinds
    # a level where every request failed ends the command with exit 1 and one line saying so
    assert sent == SENT and code == (0 if any_ok else 1)
    assert any_ok or f"every request failed at {server.url} c=4" in err.splitlines()[-1]
    assert sum(kinds.values()) == sent  # completed + errors == sent
    assert kinds == expected
    assert runs == ["finished"]
    assert all(messages)  # each error says what happened


@pytest.mark.parametrize("mode", ["props_list", "meta_string"])
def test_odd_endpoint_shapes_do_not_crash_bench_or_verify(capsys, tmp_path, mode):
    db = tmp_path / "runs.db"
    with hostile_server(mode) as server:
        code, _ = bench(capsys, server.url, db)
        verified = main(["verify", server.url, "--json"])
        err = capsys.readouterr().err
    assert code == 0 and verified == 0 and "Traceback" not in err
    assert stored(db)[0] == {("ok", None): SENT}


@pytest.mark.parametrize(
    ("mode", "message"),
    [("models_drip", "timed out"), ("models_huge", "answered more than 1000000 bytes")],
)
@pytest.mark.parametrize("command", ["bench", "verify"])
def test_a_slow_or_huge_model_list_is_one_line_exit_1(capsys, tmp_path, mode, message, command):
    with hostile_server(mode) as server:
        if command == "bench":
            argv = [
                "bench",
                server.url,
                "--requests",
                "1",
                "--db",
                str(tmp_path / "r.db"),
                "--no-power",
                "--max-endpoint-bytes",
                "1000000",
            ]
        else:
            argv = ["verify", server.url, "--timeout", "1", "--max-endpoint-bytes", "1000000"]
        code = main(argv)
        posts = server.posts
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert code == 1 and posts == 0
    assert len(lines) == 1 and "Traceback" not in captured.err
    assert message in lines[0]

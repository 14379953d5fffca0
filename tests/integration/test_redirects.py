"""No HTTP reader follows a redirect off the address the user named (issue 26).

A raw server on 127.0.0.1 (tests/answer_server.py) answers with a 307 to a second loopback listener on another
port (which only counts the connections made to it), to a private-range IPv4, to an IPv6 ULA, and to a URL with
credentials in it. bench stores each request as a ``redirect`` error with the location shown (credentials never),
verify and serve's health check say so in one line; with ``bench --follow-redirects`` only a redirect to the
same host and port is followed. Nothing connects to the listener in any case.
"""

from __future__ import annotations

import sqlite3

import pytest

from servelab.cli.app import main
from servelab.engines.process import http_ok
from tests.answer_server import answer_server, http_answer, listener
from tests.hostile_answers import hostile_answer

SENT = 4
SECRET = "hunter2secret"


def _locations(port: int) -> dict[str, str]:
    return {
        "other port": f"http://127.0.0.1:{port}/v1/chat/completions",
        "private ipv4": "http://10.255.255.1:8000/v1/chat/completions",
        "ipv6 ula": "http://[fd00::1]:8080/v1/chat/completions",
        "credentials": f"http://user:{SECRET}@127.0.0.1:{port}/v1/chat/completions?key={SECRET}",
    }


def _redirect(location: str) -> bytes:
    return http_answer("307 Temporary Redirect", b"", {"Location": location})


def _stored(db) -> tuple[list[tuple[str, str | None, str | None]], list[str]]:
    with sqlite3.connect(db) as c:
        rows = c.execute("SELECT status, error_kind, error FROM requests").fetchall()
        runs = [r for (r,) in c.execute("SELECT status FROM runs")]
    return rows, runs


def _bench(server_url: str, db, *extra: str) -> int:
    return main(
        [
            "bench",
            server_url,
            "--concurrency",
            "2",
            "--requests",
            str(SENT),
            "--warmup",
            "0",
            "--db",
            str(db),
            "--no-power",
            *extra,
        ]
    )


@pytest.mark.parametrize("where", list(_locations(1)))
@pytest.mark.parametrize("follow", [False, True])
def test_bench_never_follows_a_redirect_elsewhere(capsys, tmp_path, where, follow):
    db = tmp_path / "runs.db"
    with listener() as elsewhere:
        location = _locations(elsewhere.port)[where]
        with answer_server(lambda serial, path: _redirect(location)) as server:
            code = _bench(server.url, db, *(["--follow-redirects"] if follow else []))
            answered = server.answered
        accepts = elsewhere.accepts
    err = capsys.readouterr().err
    rows, runs = _stored(db)
    assert code == 1 and "Traceback" not in err and accepts == 0
    assert answered == SENT and len(rows) == SENT and runs == ["finished"]
    assert {(status, kind) for status, kind, _ in rows} == {("error", "redirect")}
    shown = location.replace(f"user:{SECRET}@", "").split("?")[0]
    assert all(shown in (message or "") for _, _, message in rows)
    assert SECRET not in err and all(SECRET not in (message or "") for _, _, message in rows)


def test_bench_follows_a_redirect_to_the_same_host_and_port_only_when_asked(capsys, tmp_path):
    def answer(serial: int, path: str) -> bytes:
        if path.startswith("/moved"):
            return hostile_answer("content", "ok")
        return _redirect(f"/moved{path}")

    with answer_server(answer) as server:
        refused = _bench(server.url, tmp_path / "a.db")
        followed = _bench(server.url, tmp_path / "b.db", "--follow-redirects")
        posts = server.posts
    capsys.readouterr()
    assert refused == 1 and {k for _, k, _ in _stored(tmp_path / "a.db")[0]} == {"redirect"}
    assert followed == 0 and _stored(tmp_path / "b.db")[0] == [("ok", None, None)] * SENT
    assert posts == SENT + 2 * SENT  # the refused ones, then each followed one twice


@pytest.mark.parametrize("where", list(_locations(1)))
def test_verify_and_the_health_check_show_the_redirect_and_do_not_follow_it(capsys, where):
    with listener() as elsewhere:
        location = _locations(elsewhere.port)[where]
        gets = {
            path: _redirect(location)
            for path in ("/v1/models", "/health", "/props", "/version", "/api/version")
        }
        with answer_server(lambda serial, path: b"", gets=gets) as server:
            code = main(["verify", server.url])
            healthy = http_ok(server.url + "/health")
        accepts = elsewhere.accepts
    err = capsys.readouterr().err
    assert code == 1 and not healthy and accepts == 0
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err and SECRET not in err
    assert "redirect" in err and location.replace(f"user:{SECRET}@", "").split("?")[0] in err


@pytest.mark.parametrize("location", ["http://[::1:80/x", ""])
def test_an_unusable_location_is_the_same_one_line_not_a_traceback(capsys, tmp_path, location):
    headers = {"Location": location} if location else {}
    gets = {"/v1/models": http_answer("307 Temporary Redirect", b"", headers)}
    with answer_server(
        lambda serial, path: http_answer("307 Temporary Redirect", b"", headers), gets=gets
    ) as server:
        code = main(["verify", server.url])
        err = capsys.readouterr().err
        db = tmp_path / "runs.db"
        bench_code = main(
            [
                "bench",
                server.url,
                "--requests",
                "2",
                "--warmup",
                "0",
                "--db",
                str(db),
                "--no-power",
                "--model",
                "m",
            ]
        )
        bench_err = capsys.readouterr().err
    assert code == 1 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "a redirect to a" in err and "Location" in err
    assert bench_code == 1 and "Traceback" not in bench_err

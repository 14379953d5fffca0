"""A server that drips its response headers a byte at a time is cut off at the whole-request deadline, by the
endpoint reads (verify) and by bench's load alike (issue 14)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from servelab.cli.app import main
from tests.drip_server import header_drip

SENT = 4


def test_verify_gives_up_on_dripped_headers_at_its_timeout(capsys) -> None:
    with header_drip() as url:
        code = main(["verify", url, "--timeout", "2"])
    out, err = capsys.readouterr()
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and "Traceback" not in err
    assert url in err and "no whole answer within 2 s" in err  # the deadline, not a per-read timeout


def test_bench_stores_dripped_headers_as_deadline_records(tmp_path: Path, capsys) -> None:
    db = tmp_path / "runs.db"
    with header_drip(models_ok=True) as url:
        argv = [
            "bench",
            url,
            "--concurrency",
            "2",
            "--requests",
            str(SENT),
            "--warmup",
            "0",
            "--db",
            str(db),
            "--deadline",
            "1",
            "--no-power",
            "--json",
        ]
        code = main(argv)
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err  # every request failed: exit 1 and one line saying so
    assert f"every request failed at {url} c=2" in err.splitlines()[-1]
    with sqlite3.connect(db) as c:
        kinds = c.execute("SELECT status, error_kind, count(*) FROM requests GROUP BY 1, 2").fetchall()
        runs = [r for (r,) in c.execute("SELECT status FROM runs")]
    assert kinds == [("error", "deadline", SENT)] and runs == ["finished"]

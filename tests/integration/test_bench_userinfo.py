"""Credentials in the URL reach every request bench sends, probes and load alike, and never what it keeps
or shows: the stored run, `servelab runs --json`, the export, the report (issue 14)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

from servelab.cli.app import main
from tests.hostile_server import hostile_server

TOKEN = base64.b64encode(b"me:hunter2").decode()
SENT = 6


def _everything_kept(db: Path) -> bytes:
    """The store and its journal, byte for byte (SQLite pages, WAL, journal lines)."""
    files = [p for p in db.parent.rglob("*") if p.is_file()]
    return b"".join(p.read_bytes() for p in files)


def test_userinfo_goes_with_every_request_and_nowhere_else(tmp_path: Path, capsys) -> None:
    db = tmp_path / "runs.db"
    with hostile_server("plain") as server:
        port = server.url.rsplit(":", 1)[1]
        argv = [
            "bench",
            f"http://me:hunter2@127.0.0.1:{port}",
            "--concurrency",
            "2",
            "--requests",
            str(SENT),
            "--warmup",
            "0",
            "--db",
            str(db),
            "--no-power",
            "--json",
        ]
        assert main(argv) == 0
        seen = list(server.seen)
    bench = capsys.readouterr()
    load = [s for s in seen if s[0] == "POST" and s[1].endswith("/completions")]
    assert len(load) == SENT and len(seen) > SENT  # the probes came first
    assert {auth for _, _, auth in seen} == {f"Basic {TOKEN}"}

    assert main(["runs", "--db", str(db), "--json"]) == 0
    runs = capsys.readouterr()
    run_id = json.loads(runs.out)[0]["id"]
    assert main(["export", run_id, "--db", str(db), "-o", str(tmp_path / "export.json")]) == 0
    assert (
        main(["export", run_id, "--db", str(db), "--format", "csv", "-o", str(tmp_path / "export.csv")]) == 0
    )
    assert main(["report", run_id, "--db", str(db), "-o", str(tmp_path / "bill.html")]) == 0
    assert main(["report", run_id, "--db", str(db), "-o", str(tmp_path / "bill.md")]) == 0
    assert main(["report", run_id, "--db", str(db), "--terminal"]) == 0
    shown = capsys.readouterr()
    kept = _everything_kept(db)
    for text in (bench.out, bench.err, runs.out, runs.err, shown.out, shown.err, kept.decode("latin-1")):
        assert "hunter2" not in text and TOKEN not in text
    exported = (tmp_path / "export.json").read_text() + (tmp_path / "export.csv").read_text()
    pages = (tmp_path / "bill.html").read_text() + (tmp_path / "bill.md").read_text()
    assert "hunter2" not in exported + pages and TOKEN not in exported + pages
    assert f"http://127.0.0.1:{port}" in exported  # the URL is kept, without its credentials

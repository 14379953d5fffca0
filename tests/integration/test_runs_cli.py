"""`servelab runs` against a real SQLite store written through the Store API."""

from __future__ import annotations

import json
from pathlib import Path

from servelab.cli.app import main
from tests.runs_factory import store_run


def test_runs_lists_every_run_oldest_first_as_json(tmp_path: Path, capsys) -> None:
    db = tmp_path / "runs.db"
    first = store_run(db, name="baseline", engines=("llamacpp", "sglang"))
    second = store_run(db, name="unfinished", finish=False)
    assert main(["runs", "--db", str(db), "--json"]) == 0
    out, err = capsys.readouterr()
    runs = json.loads(out)
    assert err == ""
    assert [r["id"] for r in runs] == [first, second]
    assert runs[0] | {"created": None} == {
        "id": first,
        "name": "baseline",
        "created": None,
        "status": "finished",
        "partial": False,
        "engines": ["llamacpp", "sglang"],
        "workload": "short",
        "requests": 2 * (3 + 6 + 12),
        "errors": 0,
    }
    assert runs[1]["partial"] is True and runs[1]["status"] == "running"


def test_runs_table_shows_ids_whole_and_marks_partial_runs(tmp_path: Path, capsys) -> None:
    db = tmp_path / "runs.db"
    run_id = store_run(db, name="[bold]x[/bold]", finish=False)
    assert main(["runs", "--db", str(db)]) == 0
    out, err = capsys.readouterr()
    assert run_id in out
    assert "partial" in out
    assert "[bold]x" in out  # a run name is shown as text, never interpreted as markup
    assert err == ""


def test_runs_on_an_empty_store_says_how_to_fill_it(capsys) -> None:
    assert main(["runs"]) == 0  # the (isolated) default store, as on a fresh machine
    out, err = capsys.readouterr()
    assert "servelab bench" in out and err == ""
    assert main(["runs", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_a_db_path_that_does_not_exist_is_an_error_and_creates_nothing(tmp_path: Path, capsys) -> None:
    typo = tmp_path / "no-such-dir" / "runs.db"
    assert main(["runs", "--db", str(typo)]) == 1
    out, err = capsys.readouterr()
    assert (
        out == ""
        and err.strip()
        == f"servelab: error: no result store at {typo}; run `servelab bench --db {typo}` first or pass --db"
    )
    assert not typo.parent.exists()


def test_a_store_that_is_not_sqlite_is_one_line_on_stderr(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "runs.db"
    bad.write_bytes(b"\x00garbage" * 512)
    assert main(["runs", "--db", str(bad)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("servelab: error: result store") and "not a database" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_listing_runs_before_any_benchmark_creates_no_store(capsys) -> None:
    from servelab.paths import default_db_path

    assert main(["runs", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []
    assert not default_db_path().exists()


def test_reading_commands_on_a_fresh_machine_say_so_and_create_no_store(tmp_path: Path, capsys) -> None:
    from servelab.paths import default_db_path

    default = default_db_path()
    assert not default.exists()
    expected = (
        f"servelab: error: no runs stored yet (no result store at {default}): record one with "
        "`servelab bench URL`, or pass --db PATH\n"
    )
    for args in (
        ["compare", "a", "b"],
        ["export", "a"],
        ["report", "-o", str(tmp_path / "bill.html")],
        ["spec", "--accept-rate", "0.5", "--draft-tokens", "4", "--baseline-run", "a", "--spec-run", "b"],
    ):
        code = main(args)
        out, err = capsys.readouterr()
        assert (code, out, err) == (1, "", expected), args
    assert not default.exists()
    assert not (tmp_path / "bill.html").exists()

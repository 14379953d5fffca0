"""A store written by older code (tests/fixtures/stores/README.md) opens, migrates and reads the same."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

import pytest

from servelab.cli.app import main
from servelab.store import Store
from servelab.store.migrations import MIGRATIONS, applied_migrations

STORES = Path(__file__).parents[1] / "fixtures" / "stores"
EXPECTED = STORES / "before-typed.expected"
IDS = json.loads((STORES / "before-typed.runs.json").read_text())
OUT = "{out}"


def _outputs() -> list[tuple[list[str], str]]:
    bench, open_loop, predicted = IDS["bench"], IDS["open_loop"], IDS["predicted"]
    return [
        (["runs", "--json"], "runs.json"),
        *[(["export", run_id, "--json"], f"export-{key}.json") for key, run_id in IDS.items()],
        *[(["export", run_id, "--format", "csv"], f"export-{key}.csv") for key, run_id in IDS.items()],
        (["export", bench, "--level", "c=2"], "export-bench-c2.json"),
        (["compare", bench, predicted, "--json"], "compare.json"),
        (["report", bench, open_loop, "--predicted", predicted, "--format", "md", "-o", OUT], "report.md"),
    ]


@pytest.fixture(scope="module")
def old_store(tmp_path_factory) -> Path:
    copy = tmp_path_factory.mktemp("old") / "store.sqlite"
    shutil.copyfile(STORES / "before-typed.sqlite", copy)
    return copy


def test_the_old_store_is_migrated_once_on_open(old_store: Path) -> None:
    import sqlite3

    with contextlib.closing(sqlite3.connect(old_store)) as db:
        before = applied_migrations(db)
    assert before == ["m001_initial", "m002_level_stats"]  # what the fixture was made with
    with Store.open(old_store) as store:
        assert len(store.list_runs()) == 3
    with contextlib.closing(sqlite3.connect(old_store)) as db:
        assert applied_migrations(db) == [fn.__name__ for fn in MIGRATIONS]


@pytest.mark.parametrize(("argv", "name"), _outputs(), ids=[name for _, name in _outputs()])
def test_old_store_reads_as_it_did(old_store: Path, tmp_path: Path, argv: list[str], name: str) -> None:
    out = tmp_path / name
    argv = [str(out) if a == OUT else a for a in argv]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main([*argv, "--db", str(old_store)]) == 0
    text = out.read_text() if out.exists() else printed.getvalue()
    expected = (EXPECTED / name).read_text()
    if name == "report.md":  # the bill says when it was made
        text, expected = (_without_generated(t) for t in (text, expected))
    if name == "export-predicted.json":  # the one change migration m003 makes that an output shows
        assert json.loads(text) == _with_target_version(json.loads(expected))
        return
    assert text == expected


def _with_target_version(export: dict) -> dict:
    """A prediction's target info gains the key every target info has: `version`, none for an emulated server."""
    for target in export["targets"]:
        assert "version" not in target["info"]
        target["info"] = {"version": None, **target["info"]}
    return export


def _without_generated(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.startswith("_Generated "))

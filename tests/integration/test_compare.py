"""`servelab compare A B`: side by side with significance, warnings when runs are not like for like."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servelab.cli.app import main
from servelab.report.significance import bootstrap_median_diff, mann_whitney
from servelab.results.run import RunWorkload
from tests.runs_factory import store_run


def test_a_slower_run_shows_the_change_and_a_significant_p(tmp_path: Path, capsys) -> None:
    db = tmp_path / "runs.db"
    a = store_run(db, itl_ms=10.0, ladder=(1, 4))
    b = store_run(db, itl_ms=12.0, ladder=(1, 4))
    assert main(["compare", a, b, "--db", str(db), "--json"]) == 0
    out, err = capsys.readouterr()
    assert err == ""  # same workload, both finished: nothing to warn about
    result = json.loads(out)
    rows = {(r["level"], r["metric"]): r for r in result["rows"]}
    tpot = rows[("c=4", "tpot_ms")]
    assert tpot["a"] == pytest.approx(13.0) and tpot["b"] == pytest.approx(15.6)  # 10 and 12 ms × 1.3 at c=4
    assert tpot["change_pct"] == pytest.approx(20.0)
    assert tpot["significant"] is True and tpot["p_value"] < 0.001
    assert tpot["diff_ci"] == pytest.approx([2.6, 2.6])  # every request moved by exactly 2.6 ms
    ttft = rows[("c=4", "ttft_ms")]
    assert ttft["change_pct"] == pytest.approx(0.0) and ttft["significant"] is False
    assert rows[("c=1", "output_tok_s")]["p_value"] is None


def test_the_table_fits_80_columns_with_every_figure_whole(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    db = tmp_path / "runs.db"
    a, b = store_run(db, itl_ms=10.0, ladder=(1, 4)), store_run(db, itl_ms=12.0, ladder=(1, 4))
    assert main(["compare", a, b, "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 80 and "…+" in out  # the CI: "+2.6…+2.6"
    lines = [line.split() for line in out.splitlines()]
    tpot = next(cells for cells in lines if cells[:2] == ["c=4", "tpot_ms"])  # one target: no target column
    assert tpot[2:6] == ["13", "15.6", "+20.0%", "+2.6…+2.6"] and tpot[-1] == "*"
    assert any(cells[:2] == ["c=1", "output_tok_s"] for cells in lines)  # metric names whole
    two = tmp_path / "two.db"
    c, d = (store_run(two, engines=("llamacpp", "sglang")) for _ in range(2))
    assert main(["compare", c, d, "--db", str(two)]) == 0
    assert "target" in capsys.readouterr().out  # two targets: the column tells them apart


def test_different_workloads_and_partial_runs_warn(tmp_path: Path, capsys) -> None:
    db = tmp_path / "runs.db"
    a = store_run(db)
    b = store_run(db, workload=RunWorkload(kind="long", input_tokens=4096, output_tokens=16), finish=False)
    assert main(["compare", a, b, "--db", str(db)]) == 0
    out, err = capsys.readouterr()
    assert "different workloads" in err and "partial" in err
    assert "tpot_ms" in out and "Mann-Whitney" in out


def test_unknown_run_names_the_runs_command(tmp_path: Path, capsys) -> None:
    db = tmp_path / "runs.db"
    a = store_run(db)
    assert main(["compare", a, "20990101", "--db", str(db)]) == 1
    out, err = capsys.readouterr()
    assert out == "" and "no run '20990101'" in err and "servelab runs" in err


def test_a_missing_store_is_an_error_not_an_empty_file(tmp_path: Path, capsys) -> None:
    assert main(["compare", "a", "b", "--db", str(tmp_path / "none.db")]) == 1
    assert "no result store" in capsys.readouterr().err
    assert not (tmp_path / "none.db").exists()


def test_mann_whitney_matches_reference_values() -> None:
    # Reference: scipy.stats.mannwhitneyu(a, b, alternative="two-sided", method="asymptotic") (scipy 1.17.1).
    a, b = [1, 2, 2, 3, 3, 3, 4], [2, 3, 3, 4, 5, 5, 6, 6]
    result = mann_whitney(a, b)
    assert result.u == 10.5
    assert result.p_value == pytest.approx(0.04373912284136004, rel=1e-9)
    assert mann_whitney([1, 2], [3, 4, 5]).p_value is None
    assert mann_whitney([5, 5, 5], [5, 5, 5]).p_value == 1.0


def test_bootstrap_interval_brackets_a_known_shift() -> None:
    a = [float(x) for x in range(100)]
    b = [x + 10 for x in a]
    low, high = bootstrap_median_diff(a, b)
    assert low < 10 < high and high - low < 30

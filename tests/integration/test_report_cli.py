"""`servelab report` end to end over a real SQLite store: files written, formats, notes, warnings, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servelab.cli.app import main
from servelab.results.run import RunWorkload
from tests.runs_factory import store_run

PLAN = {
    "model": "tiny",
    "gpu": "cpu",
    "plans": [
        {
            "engine": "llamacpp",
            "quant": "q8_0",
            "context": 4096,
            "fits": True,
            "memory_bytes": {"weights": 1 << 30, "kv_cache": 1 << 28, "total": 1 << 31},
            "decode_ceiling_tok_s": {"short": 150.0, "full_context": 120.0},
        }
    ],
}


@pytest.mark.usefixtures("measured_host")  # the bound reads this machine
def test_html_report_of_the_latest_run_with_plan_doctor_and_spec(tmp_path: Path, capsys) -> None:
    db = tmp_path / "runs.db"
    store_run(db, name="older")
    latest = store_run(db, name="latest")
    (tmp_path / "plan.json").write_text(json.dumps(PLAN))
    (tmp_path / "doctor.json").write_text(
        json.dumps(
            {
                "gpus": [],
                "pairs": [],
                "findings": [
                    {
                        "id": "p2p-blocked",
                        "severity": "critical",
                        "title": "P2P blocked under KVM",
                        "fix": "pass the GPUs through",
                    }
                ],
            }
        )
    )
    (tmp_path / "spec.json").write_text(
        json.dumps(
            {
                "alpha": 0.04,
                "predicted_speedup": 0.9,
                "measured_speedup": 0.8,
                "verdict": "rollback",
                "why": "acceptance 4%",
            }
        )
    )
    out_file = tmp_path / "out" / "bill.html"
    code = main(
        [
            "report",
            "--db",
            str(db),
            "--plan",
            str(tmp_path / "plan.json"),
            "--doctor",
            str(tmp_path / "doctor.json"),
            "--spec",
            str(tmp_path / "spec.json"),
            "-o",
            str(out_file),
            "--json",
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0 and err == ""
    result = json.loads(out)
    assert result["runs"] == [latest] and result["format"] == "html" and result["output"] == str(out_file)
    scenarios = {v["scenario"] for v in result["verdicts"]}
    assert {"single user", "serving many", "memory-starved", "speculative decoding"} <= scenarios
    html = out_file.read_text()
    assert html.startswith("<!DOCTYPE html>")
    assert "P2P blocked under KVM" in html and "rollback" in html
    assert "of the 150.0 tok/s bandwidth ceiling" in html
    assert html.count("<svg") == 8


def test_markdown_twin_writes_its_plots_beside_it(tmp_path: Path, capsys) -> None:
    db = tmp_path / "runs.db"
    run_id = store_run(db)
    assert main(["report", run_id, "--db", str(db), "-o", str(tmp_path / "bill.md")]) == 0
    assert capsys.readouterr().err.strip() == f"wrote {tmp_path / 'bill.md'}"
    text = (tmp_path / "bill.md").read_text()
    assert text.startswith("# servelab — the bill")
    assert "(bill_plots/aggregate-throughput.svg)" in text
    assert (tmp_path / "bill_plots" / "aggregate-throughput.svg").read_text().startswith("<svg")


def test_two_runs_with_different_workloads_warn_in_the_report(tmp_path: Path, capsys) -> None:
    db = tmp_path / "runs.db"
    a = store_run(db)
    b = store_run(db, workload=RunWorkload(kind="long", input_tokens=2048, output_tokens=16), finish=False)
    assert main(["report", a, b, "--db", str(db), "--format", "md", "-o", str(tmp_path / "x.md")]) == 0
    text = (tmp_path / "x.md").read_text()
    assert "different workloads" in text
    assert f"Run {b} is partial" in text


def test_terminal_shows_tables_and_bars_as_text(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    db = tmp_path / "runs.db"
    store_run(db, model="[red]<b>m</b>[/red]")
    assert main(["report", "--db", str(db), "--terminal"]) == 0
    out, err = capsys.readouterr()
    assert "aggregate output tok/s vs concurrency" in out and "█" in out
    assert "[red]<b>m</b>[/red]" in out  # shown literally, never interpreted as rich markup
    assert err == "" and list(tmp_path.iterdir()) == [db]  # nothing written


def test_bad_inputs_are_one_line_errors(tmp_path: Path, capsys) -> None:
    db = tmp_path / "runs.db"
    store_run(db)
    assert main(["report", "--db", str(db), "--format", "pdf"]) == 2
    assert (
        capsys.readouterr().err.strip()
        == "servelab: error: unknown report format 'pdf'; choose one of: html, md"
    )
    (tmp_path / "plan.json").write_text("{not json")
    assert main(["report", "--db", str(db), "--plan", str(tmp_path / "plan.json")]) == 2
    err = capsys.readouterr().err
    assert f"--plan {tmp_path / 'plan.json'}: not JSON (" in err and len(err.strip().splitlines()) == 1
    assert main(["report", "--db", str(tmp_path / "empty.db")]) == 1
    assert "no result store" in capsys.readouterr().err
    assert main(["report", "nope", "--db", str(db)]) == 1
    assert "servelab runs" in capsys.readouterr().err


def test_binary_plan_doctor_and_spec_files_are_one_line_errors(tmp_path: Path, capsys) -> None:
    db = tmp_path / "runs.db"
    store_run(db)
    blob = tmp_path / "model.gguf"
    blob.write_bytes(bytes(range(256)) * 4)
    for option in ("--plan", "--doctor", "--spec"):
        assert main(["report", "--db", str(db), option, str(blob), "-o", str(tmp_path / "b.html")]) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.count("\n") == 1 and "Traceback" not in err
        assert f"{option} {blob}: not a JSON text file (not UTF-8)" in err
    assert not (tmp_path / "b.html").exists()


def test_terminal_and_json_together_is_a_usage_error(tmp_path: Path, capsys) -> None:
    db = tmp_path / "runs.db"
    store_run(db)
    assert main(["report", "--db", str(db), "--terminal", "--json"]) == 2
    out, err = capsys.readouterr()
    assert (
        out == "" and err == "servelab: error: --terminal and --json both claim standard output; choose one\n"
    )

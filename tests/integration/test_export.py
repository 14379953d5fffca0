"""`servelab export RUN`: vLLM-like JSON per target and level, CSV per request, from a real store."""

from __future__ import annotations

import csv
import io
import json
import sqlite3
from pathlib import Path

import pytest

from servelab.cli.app import main
from tests.runs_factory import store_run

VLLM_FIELDS = (
    "duration",
    "completed",
    "failed",
    "total_input_tokens",
    "total_output_tokens",
    "request_throughput",
    "output_throughput",
    "total_token_throughput",
    "input_lens",
    "output_lens",
    "ttfts",
    "itls",
    "latencies",
    "mean_ttft_ms",
    "median_ttft_ms",
    "std_ttft_ms",
    "p99_ttft_ms",
    "mean_tpot_ms",
    "p99_tpot_ms",
    "mean_itl_ms",
    "p99_itl_ms",
    "mean_e2el_ms",
    "p99_e2el_ms",
)


def test_json_export_has_vllm_fields_with_figures_from_the_records(tmp_path: Path, capsys) -> None:
    db = tmp_path / "runs.db"
    run_id = store_run(db, ladder=(1, 2), itl_ms=10.0)
    assert main(["export", run_id, "--db", str(db)]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    doc = json.loads(out)
    assert doc["schema"] == "servelab.export/1" and doc["run_id"] == run_id and doc["partial"] is False
    (target,) = doc["targets"]
    assert target["engine"] == "llamacpp" and target["model"] == "tiny-test-model"
    c1 = target["levels"][0]
    assert all(name in c1 for name in VLLM_FIELDS)
    assert c1["level"] == "c=1" and c1["max_concurrency"] == 1
    # runs_factory: 3 sequential requests, TTFT 55 ms, 15 gaps of 10 ms, 16 tokens, 1 ms between requests.
    assert c1["completed"] == 3 and c1["failed"] == 0
    assert c1["ttfts"] == pytest.approx([0.055] * 3)
    assert c1["median_ttft_ms"] == pytest.approx(55.0)
    assert c1["mean_tpot_ms"] == pytest.approx(10.0) and c1["p99_itl_ms"] == pytest.approx(10.0)
    assert c1["latencies"] == pytest.approx([0.205] * 3)
    assert c1["duration"] == pytest.approx(3 * 0.205 + 2 * 0.001)
    assert c1["output_throughput"] == pytest.approx(48 / c1["duration"])
    assert c1["total_output_tokens"] == 48 and c1["input_lens"] == [32, 32, 32]
    assert len(c1["itls"]) == 3 and len(c1["itls"][0]) == 15


def test_csv_export_has_one_row_per_request(tmp_path: Path, capsys) -> None:
    db = tmp_path / "runs.db"
    run_id = store_run(db, ladder=(1, 4))
    out_file = tmp_path / "run.csv"
    assert main(["export", run_id[:12], "--db", str(db), "--format", "csv", "-o", str(out_file)]) == 0
    out, err = capsys.readouterr()
    assert out == "" and f"wrote {out_file}" in err
    rows = list(csv.DictReader(io.StringIO(out_file.read_text())))
    assert len(rows) == 3 + 12
    assert {r["run_id"] for r in rows} == {run_id}
    assert float(rows[0]["ttft_ms"]) == pytest.approx(55.0)
    assert rows[-1]["level"] == "c=4" and rows[-1]["url"] == "http://127.0.0.1:8000/v1"


def test_a_partial_run_exports_as_partial(tmp_path: Path, capsys) -> None:
    db = tmp_path / "runs.db"
    run_id = store_run(db, finish=False)
    assert main(["export", run_id, "--db", str(db)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["partial"] is True


def test_bad_format_is_a_usage_error_naming_the_choices(tmp_path: Path, capsys) -> None:
    db = tmp_path / "runs.db"
    run_id = store_run(db)
    assert main(["export", run_id, "--db", str(db), "--format", "xml"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.strip() == "servelab: error: unknown export format 'xml'; choose one of: json, csv"


def test_the_results_schema_doc_names_every_exported_field_and_store_column(tmp_path: Path, capsys) -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "results-schema.md").read_text()
    db = tmp_path / "runs.db"
    run_id = store_run(db)
    assert main(["export", run_id, "--db", str(db)]) == 0
    exported = json.loads(capsys.readouterr().out)
    level = exported["targets"][0]["levels"][0]
    distribution = {
        f"{s}_{m}_ms"
        for s in ("mean", "median", "std", "p50", "p90", "p95", "p99")
        for m in ("ttft", "tpot", "itl", "e2el")
    }
    assert set(level) - distribution <= {name for name in level if f"`{name}`" in doc}
    assert "`{mean,median,std,p50,p90,p95,p99}_{ttft,tpot,itl,e2el}_ms`" in doc
    assert [k for k in exported if k != "targets" and f'"{k}"' not in doc] == []
    columns = {
        row[1]
        for table in ("runs", "targets", "levels", "requests", "samples", "metrics_snapshots")
        for row in sqlite3.connect(db).execute(f"PRAGMA table_info({table})")
    }
    assert [c for c in sorted(columns) if c not in doc] == []


def test_json_flag_is_the_json_format_and_contradicting_csv_is_a_usage_error(tmp_path: Path, capsys) -> None:
    db = tmp_path / "runs.db"
    run_id = store_run(db)
    assert main(["export", run_id, "--db", str(db), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["run_id"] == run_id
    assert main(["export", run_id, "--db", str(db), "--json", "--format", "csv"]) == 2
    assert "contradicts --json" in capsys.readouterr().err


def test_one_level_exports_as_a_flat_vllm_result(tmp_path: Path, capsys) -> None:
    db = tmp_path / "runs.db"
    run_id = store_run(db, engines=("llamacpp", "sglang"), ladder=(1, 4))
    assert main(["export", run_id, "--db", str(db), "--level", "c=4", "--target", "1"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["backend"] == "sglang" and doc["model_id"] == "tiny-test-model" and doc["max_concurrency"] == 4
    assert doc["num_prompts"] == 12 and doc["completed"] == 12 and doc["request_rate"] == "inf"
    assert all(name in doc for name in VLLM_FIELDS)
    assert doc["median_tpot_ms"] == pytest.approx(20 * 1.3)  # target 1: 2 × 10 ms, × 1.3 at c=4
    assert main(["export", run_id, "--db", str(db), "--level", "c=8"]) == 2
    assert capsys.readouterr().err.strip().endswith("has no level 'c=8'; levels: c=1, c=4")
    assert main(["export", run_id, "--db", str(db), "--level", "c=1", "--target", "5"]) == 2
    assert "no target 5; targets: 0, 1" in capsys.readouterr().err

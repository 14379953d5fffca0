"""`servelab predict` stores a run that `runs`, `export` and `report` read like a measured one (real SQLite)."""

from __future__ import annotations

import json
from pathlib import Path

from servelab.cli.app import main
from servelab.store import Store

PLAN_ARGS = ["Qwen/Qwen3-8B", "--gpu", "rtx4090", "--engine", "vllm", "--quant", "bf16", "--context", "8192"]


def test_predict_stores_a_run_runs_export_and_report_read(tmp_path: Path, capsys) -> None:
    db = tmp_path / "runs.db"
    args = ["predict", *PLAN_ARGS, "--concurrency", "1,4", "--requests", "8", "--db", str(db), "--json"]
    assert main(args) == 0
    out, err = capsys.readouterr()
    result = json.loads(out)
    run_id = result["run_id"]
    levels = result["targets"][0]["levels"]
    assert [lv["level"] for lv in levels] == ["c=1", "c=4"]
    assert levels[1]["output_tok_s"] > levels[0]["output_tok_s"]
    assert "predicting vllm bf16" in err
    with Store.open(db, must_exist=True) as store:
        run = store.load_run(run_id)
    assert (
        run.meta["predicted"]["engine"] == "vllm" and run.meta["predicted"]["effective"]["source"] == "plan"
    )
    assert len([r for r in run.requests if r.phase == "measure"]) == 16

    assert main(["runs", "--db", str(db), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [r["id"] for r in listed] == [run_id] and listed[0]["engines"] == ["vllm"]

    assert main(["export", run_id, "--db", str(db)]) == 0
    exported = json.loads(capsys.readouterr().out)
    assert exported["run_id"] == run_id

    bill = tmp_path / "bill.md"
    assert main(["report", run_id, "--db", str(db), "-o", str(bill)]) == 0
    text = bill.read_text()
    assert "vllm · Qwen/Qwen3-8B · short" in text and "c=4" in text


def test_predict_from_a_saved_plan_file(tmp_path: Path, capsys) -> None:
    plan = tmp_path / "plan.json"
    assert main(["plan", *PLAN_ARGS, "--save", str(plan)]) == 0
    capsys.readouterr()
    args = ["predict", "--plan", str(plan), "--concurrency", "2", "--requests", "4", "--no-store", "--json"]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["run_id"] is None and out["targets"][0]["engine"] == "vllm"


def test_predict_without_an_engine_says_what_to_give(capsys) -> None:
    assert main(["predict", "Qwen/Qwen3-8B"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "give MODEL and --engine" in err and "Traceback" not in err


def test_engine_flags_after_dashes_reach_the_emulated_scheduler(capsys) -> None:
    """vLLM's --max-num-batched-tokens, in its own words after --: a 1,024-token prompt in chunks of 64 is 16 steps,
    each reading the weights again, so its first token comes later than in one 2,048-token step."""
    load = ["--concurrency", "1", "--requests", "2", "--input-tokens", "1024", "--output-tokens", "4",
            "--no-store", "--json", "--no-calibration"]  # fmt: skip

    def ttft_ms(*words: str) -> float:
        assert main(["predict", *PLAN_ARGS, *load, *words]) == 0
        return float(json.loads(capsys.readouterr().out)["targets"][0]["levels"][0]["ttft_ms"]["p50"])

    assert ttft_ms("--", "--max-num-batched-tokens", "64") > 1.5 * ttft_ms()
    assert main(["predict", *PLAN_ARGS, "--", "--max-num-batched-tokens", "0"]) == 2
    assert "--max-num-batched-tokens must be a whole number" in capsys.readouterr().err

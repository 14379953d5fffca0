"""`servelab predict` stores a run that `runs`, `export` and `report` read like a measured one (real SQLite)."""

from __future__ import annotations

import json
from pathlib import Path

from servelab.cli.app import main
from servelab.predict.stepmodel import STEP_MODEL_ENV
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
    # a GPU is priced by the step model fitted to the public corpus that ships (servelab/predict/stepmodel.json)
    assert run.meta.predicted is not None
    assert run.meta.predicted.target.engine == "vllm" and run.meta.predicted.effective["source"] == "corpus"
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
    load = [
        "--concurrency",
        "1",
        "--requests",
        "2",
        "--input-tokens",
        "1024",
        "--output-tokens",
        "4",
        "--no-store",
        "--json",
        "--no-calibration",
    ]

    def ttft_ms(*words: str) -> float:
        assert main(["predict", *PLAN_ARGS, *load, *words]) == 0
        return float(json.loads(capsys.readouterr().out)["targets"][0]["levels"][0]["ttft_ms"]["p50"])

    assert ttft_ms("--", "--max-num-batched-tokens", "64") > 1.5 * ttft_ms()
    assert main(["predict", *PLAN_ARGS, "--", "--max-num-batched-tokens", "0"]) == 2
    assert "--max-num-batched-tokens must be a whole number" in capsys.readouterr().err


def _predicted(capsys, args: list[str], db: Path) -> tuple[dict, str]:
    """(the stored run's meta `predicted`, stderr) of a `servelab predict` run into `db`."""
    assert main(["predict", "--concurrency", "1", "--requests", "4", "--db", str(db), "--json", *args]) == 0
    out, err = capsys.readouterr()
    with Store.open(db, must_exist=True) as store:
        run = store.load_run(json.loads(out)["run_id"])
    assert run.meta.predicted is not None
    return run.meta.predicted.to_json(), err


def _output_tok_s(capsys, args: list[str]) -> float:
    assert main(["predict", *args, "--concurrency", "1", "--requests", "4", "--no-store", "--json"]) == 0
    out, _ = capsys.readouterr()
    return json.loads(out)["targets"][0]["levels"][0]["output_tok_s"]


def test_predict_from_a_plan_keeps_its_bandwidth_override(tmp_path: Path, capsys, monkeypatch) -> None:
    """The saved plan's --bandwidth prices predict --plan's steps (it rebuilt the card by name and dropped it).
    Priced with the plan's own figures, where a decode step is the weights' read alone (the shipped step model adds
    fixed per-step costs that no bandwidth moves, so its ratio depends on the fit, not on this path)."""
    monkeypatch.setenv(STEP_MODEL_ENV, "none")
    plan = tmp_path / "plan.json"
    assert main(["plan", *PLAN_ARGS, "--bandwidth", "500", "--save", str(plan)]) == 0
    capsys.readouterr()
    assert json.loads(plan.read_text())["plans"][0]["card"]["bandwidth_gb_s"] == 500
    from_plan = _output_tok_s(capsys, ["--plan", str(plan)])
    catalog = _output_tok_s(capsys, PLAN_ARGS)  # the rtx4090's 1,008 GB/s
    direct = _output_tok_s(capsys, [*PLAN_ARGS, "--bandwidth", "500"])
    assert from_plan == direct
    assert 1.9 < catalog / from_plan < 2.1  # decode reads the weights at the plan's 500 GB/s


def test_predict_takes_plans_card_and_release_options(tmp_path: Path, capsys) -> None:
    db = tmp_path / "runs.db"
    args = [*PLAN_ARGS, "--bandwidth", "800", "--tflops", "100", "--engine-version", "0.10.1"]
    predicted, err = _predicted(capsys, args, db)
    assert predicted["engine_version"] == "0.10.1" and "predicting vllm bf16" in err
    default, _ = _predicted(capsys, PLAN_ARGS, db)
    assert default["engine_version"] is None
    ratio = predicted["effective"]["bandwidth_bytes_s"] / default["effective"]["bandwidth_bytes_s"]
    assert abs(ratio - 800 / 1008) < 1e-3
    assert abs(predicted["effective"]["flops_s"] / default["effective"]["flops_s"] - 100 / 165.2) < 1e-3


def test_predict_refuses_what_a_saved_plan_fixes(tmp_path: Path, capsys) -> None:
    plan = tmp_path / "plan.json"
    assert main(["plan", *PLAN_ARGS, "--save", str(plan)]) == 0
    capsys.readouterr()
    for flag, value in (("--vram", "16"), ("--engine-version", "0.10.1")):
        assert main(["predict", "--plan", str(plan), flag, value, "--no-store"]) == 2
        out, err = capsys.readouterr()
        assert out == "" and f"drop {flag}" in err and len(err.strip().splitlines()) == 1


def test_predict_override_alone_and_version_without_engine_are_one_line(capsys) -> None:
    assert main(["predict", "Qwen/Qwen3-8B", "--engine", "vllm", "--bandwidth", "500", "--no-store"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "--bandwidth without --gpu" in err and "Traceback" not in err
    assert main(["predict", "Qwen/Qwen3-8B", "--engine", "vllm", "--gpu", "rtx4090", "--vram", "-1"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "--vram" in err and len(err.strip().splitlines()) == 1


def test_predict_reads_a_plan_saved_before_plans_recorded_their_card(tmp_path: Path, capsys) -> None:
    fixture = Path(__file__).parents[1] / "fixtures" / "plans" / "qwen3-8b-vllm-rtx4090.json"
    assert "card" not in json.loads(fixture.read_text())["plans"][0]
    assert _output_tok_s(capsys, ["--plan", str(fixture)]) > 0


def test_predict_cold_start_runs_no_warm_up_requests(tmp_path: Path, capsys) -> None:
    db = tmp_path / "runs.db"
    phases = {}
    for cold in (False, True):
        args = ["predict", *PLAN_ARGS, "--concurrency", "8", "--requests", "16", "--db", str(db), "--json"]
        assert main([*args, *(["--cold-start"] if cold else [])]) == 0
        run_id = json.loads(capsys.readouterr().out)["run_id"]
        with Store.open(db, must_exist=True) as store:
            run = store.load_run(run_id)
        phases[cold] = sorted({r.phase for r in run.requests})
        assert run.meta.settings["warmup"] == (0 if cold else None)
    assert phases == {False: ["measure", "warmup"], True: ["measure"]}
    assert main(["predict", *PLAN_ARGS, "--cold-start", "--warmup", "2", "--no-store"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "--cold-start runs no warm-up requests; drop --warmup 2" in err


def test_predict_prices_sglang_chunked_prefill_size_given_after_the_dashes(capsys) -> None:
    base = [
        "predict",
        "Qwen/Qwen3-8B",
        "--gpu",
        "h100",
        "--engine",
        "sglang",
        "--quant",
        "bf16",
        "--context",
        "8192",
        "--input-tokens",
        "2048",
        "--output-tokens",
        "16",
        "--concurrency",
        "4",
        "--requests",
        "8",
        "--no-store",
        "--json",
    ]
    ttft = {}
    for chunk in (None, "256"):
        assert main([*base, *([] if chunk is None else ["--", "--chunked-prefill-size", chunk])]) == 0
        out, err = capsys.readouterr()
        ttft[chunk] = json.loads(out)["targets"][0]["levels"][0]["ttft_ms"]["p50"]
    assert ttft[None] != ttft["256"]  # the scheduler prefills 256-token chunks, not the card's default 8192
    assert main([*base, "--", "--chunked-prefill-size", "-1"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "sglang --chunked-prefill-size -1" in err and len(err.strip().splitlines()) == 1


def test_predict_takes_each_engines_speculative_flags_as_the_drafted_tokens(tmp_path: Path, capsys) -> None:
    db = tmp_path / "runs.db"
    cases = (
        (
            ["Qwen/Qwen3.5-27B", "--gpu", "h100", "--engine", "vllm", "--quant", "awq"],
            ["--speculative-config", '{"method": "mtp", "num_speculative_tokens": 3}'],
            3,
        ),
        (
            ["Qwen/Qwen3.5-27B", "--gpu", "h100", "--engine", "sglang", "--quant", "awq"],
            [
                "--speculative-algorithm",
                "NEXTN",
                "--speculative-num-steps",
                "2",
                "--speculative-eagle-topk",
                "1",
                "--speculative-num-draft-tokens",
                "3",
            ],
            2,
        ),
        (
            ["meta-llama/Llama-3.1-8B", "--gpu", "rtx4090", "--engine", "llamacpp", "--quant", "Q4_K_M"],
            ["-md", "meta-llama/Llama-3.2-1B", "--spec-draft-n-max", "5"],
            5,
        ),
    )
    for plan_args, words, gamma in cases:
        args = [*plan_args, "--context", "8192", "--spec-acceptance", "0.7", "--", *words]
        predicted, err = _predicted(capsys, args, db)
        assert predicted["speculation"]["gamma"] == gamma, words
    args = [
        "predict",
        *cases[0][0],
        "--context",
        "8192",
        "--concurrency",
        "1",
        "--requests",
        "2",
        "--no-store",
    ]
    assert main([*args, "--", *cases[0][1]]) == 0
    out, err = capsys.readouterr()
    assert "the plan drafts 3 tokens per step (mtp); give --spec-acceptance P to price it" in err
    assert main([*args, "--speculative", "mtp:2", "--", *cases[0][1]]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "speculative decoding asked twice" in err and len(err.strip().splitlines()) == 1


def test_predict_carries_eager_mode_and_expert_parallelism(tmp_path: Path, capsys) -> None:
    """Accepted and kept in the plan's figures (docs/predict.md: not priced in the step time yet); eager mode frees
    the CUDA graphs' memory."""
    base = [
        "plan",
        "Qwen/Qwen3-30B-A3B",
        "--gpu",
        "h100",
        "--engine",
        "vllm",
        "--quant",
        "fp8",
        "--context",
        "8192",
        "--json",
    ]
    assert main(base) == 0
    graphs = json.loads(capsys.readouterr().out)["plans"][0]
    assert main([*base, "--", "--enforce-eager", "--enable-expert-parallel"]) == 0
    eager = json.loads(capsys.readouterr().out)["plans"][0]
    assert eager["details"]["enforce_eager"] is True and eager["details"]["enable_expert_parallel"] is True
    assert "enforce_eager" not in graphs["details"]
    assert eager["memory_bytes"]["activations"] < graphs["memory_bytes"]["activations"]
    assert eager["command"][-2:] == ["--enforce-eager", "--enable-expert-parallel"]
    predict = ["predict", *base[1:-1], "--concurrency", "1", "--requests", "2", "--no-store", "--json", "--"]
    assert main([*predict, "--enforce-eager", "--enable-expert-parallel"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["targets"][0]["levels"][0]["completed"] == 2 and "Traceback" not in err


def test_predict_takes_a_launch_command_as_plan_does(capsys) -> None:
    cmd = "vllm serve Qwen/Qwen3-8B --max-model-len 8192 --max-num-seqs 8 --enforce-eager"
    args = [
        "predict",
        "--cmd",
        cmd,
        "--gpu",
        "rtx4090",
        "--concurrency",
        "1",
        "--requests",
        "2",
        "--no-store",
        "--json",
    ]
    assert main(args) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["targets"][0]["engine"] == "vllm" and "predicting vllm" in err
    assert main(["plan", "--cmd", cmd, "--gpu", "rtx4090", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)["plans"][0]
    assert plan["details"]["enforce_eager"] is True and plan["details"]["max_num_seqs"] == 8


def test_predict_from_a_plan_for_a_custom_card(tmp_path: Path, capsys) -> None:
    """A card made of --vram/--bandwidth/--tflops has no catalog entry to rebuild by name: the plan's figures are it."""
    plan = tmp_path / "plan.json"
    custom = [
        "Qwen/Qwen3-8B",
        "--vram",
        "40",
        "--bandwidth",
        "700",
        "--tflops",
        "120",
        "--engine",
        "vllm",
        "--quant",
        "bf16",
        "--context",
        "8192",
    ]
    assert main(["plan", *custom, "--save", str(plan)]) == 0
    capsys.readouterr()
    assert _output_tok_s(capsys, ["--plan", str(plan)]) == _output_tok_s(capsys, custom)

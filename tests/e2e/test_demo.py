"""`servelab demo` end to end on this machine: a real llama-server, the project's own hybrid model."""

from __future__ import annotations

import asyncio
import json

import psutil

from servelab.cli.app import main
from tests.e2e.chromium_cdp import Chromium, inspect_page
from tests.e2e.test_bill_layout import LAYOUT_JS, _artifacts


def test_demo_runs_both_engines_catches_the_divided_context_and_bills_them_side_by_side(
    llama_server_bin, vllm_bin, shared_vllm_runtime, measured_host, tmp_path, capsys, monkeypatch
):
    monkeypatch.setenv("SERVELAB_LLAMA_SERVER", str(llama_server_bin))
    monkeypatch.setenv("SERVELAB_VLLM", str(vllm_bin))
    workdir = tmp_path / "demo"
    assert main(["demo", "--workdir", str(workdir), "--threads", "1", "--requests", "3", "--json"]) == 0
    captured = capsys.readouterr()
    steps = {step["name"]: step["outcome"] for step in json.loads(captured.out)["steps"]}

    assert steps["engine"]["llama_server"] == str(llama_server_bin)
    assert steps["engine"]["vllm"]["program"] == str(vllm_bin)
    assert steps["model"]["weights"].startswith("the same weights: all 39 tensors")
    divided, right, vllm = steps["divided"], steps["right"], steps["vllm"]
    assert divided["args"] == ["-c", "16384", "-np", "4"]
    assert divided["context_per_slot"] == 4096 and divided["slots"] == 4
    assert any("context per slot is 4096, not 16384" in line for line in divided["mismatches"])
    assert right["context_per_slot"] == 16384 and right["mismatches"] == []
    assert "skipped" not in vllm and vllm["context_per_slot"] == 16384 and vllm["mismatches"] == []
    assert steps["plan"]["context_per_slot"] == divided["context_per_slot"]
    assert len(steps["bench"]["run_ids"]) == 4  # short and mixed, each a 1/2/4 ladder, per engine
    levels = [(row["engine"], row["workload"], row["level"]) for row in steps["bench"]["levels"]]
    assert levels == [
        (e, w, f"c={c}") for e in ("llamacpp", "vllm") for w in ("short", "mixed") for c in (1, 2, 4)
    ]
    assert all(row["completed"] == 3 and row["errors"] == 0 for row in steps["bench"]["levels"])
    assert all(row["output_tok_s"] > 0 for row in steps["bench"]["levels"])
    report = workdir / "report.html"
    assert report.is_file() and "<html" in report.read_text()[:500].lower()
    _check_bill_of_two_engines(steps, workdir, report.read_text())
    _check_advice(steps, workdir, report.read_text())
    _check_layout_in_chromium(report, tmp_path)

    narration = captured.err
    for step in (
        "1. engines",
        "2. model",
        "3. plan",
        "4. launch",
        "5. relaunch right",
        "6. bench llamacpp",
        "7. launch vLLM",
        "8. bench vllm",
        "9. advise",
        "10. report",
    ):
        assert step in narration
    assert "MISMATCH: context per slot is 4096" in narration
    left = [p for p in psutil.Process().children(recursive=True) if p.is_running()]
    assert [p for p in left if "llama-server" in p.name() or "vllm" in " ".join(p.cmdline()).lower()] == []


def test_demo_summary_names_both_launches_and_the_report(tmp_path, capsys):
    from servelab.cli.demo import render
    from servelab.demo import DemoResult, DemoStep

    mismatch = "context per slot is 4096, not 16384: -c is divided by -np 4; add --kv-unified or use -np 1"
    result = DemoResult(
        tmp_path,
        (
            DemoStep(
                "divided",
                {"args": ["-c", "16384", "-np", "4"], "context_per_slot": 4096, "mismatches": [mismatch]},
            ),
            DemoStep(
                "right",
                {
                    "args": ["-c", "16384", "-np", "4", "--kv-unified"],
                    "context_per_slot": 16384,
                    "mismatches": [],
                },
            ),
            DemoStep("bench", {"run_ids": ["r1", "r2"], "db": str(tmp_path / "runs.db")}),
            DemoStep(
                "summary",
                {
                    "wall_s": 321,
                    "engines": [
                        {
                            "label": "llamacpp · llama · mixed",
                            "single_tok_s": 250.0,
                            "single_of_ceiling": 0.25,
                            "ceiling_tok_s": 1000.0,
                            "best_aggregate_tok_s": 300.0,
                            "best_at": "c=4",
                            "top_level": "c=4",
                            "ttft_p99_ms": 2500.0,
                            "tpot_p99_ms": 40.25,
                            "evictions": 3,
                        }
                    ],
                    "faster": [
                        {"scenario": "single user", "choice": "x", "sentence": "llamacpp · llama · short (a)"}
                    ],
                },
            ),
        ),
        tmp_path / "report.html",
    )
    render(result)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"-c 16384 -np 4: context per slot 4096, {mismatch}"
    assert lines[1] == "-c 16384 -np 4 --kv-unified: context per slot 16384, as asked"
    assert lines[2] == (
        "llamacpp · llama · mixed: single user 250.0 tok/s (25% of its plan's 1,000.0), best aggregate "
        "300.0 tok/s @ c=4, at c=4 TTFT p99 2,500 ms, TPOT p99 40.2 ms, evicted/stalled 3"
    )
    assert lines[3] == "faster for single user: llamacpp · llama · short (a)"
    assert lines[4] == f"benchmark runs: r1, r2 in {tmp_path / 'runs.db'}"
    assert lines[5] == f"report: {tmp_path / 'report.html'}" and lines[6] == "wall time: 321 s"


def test_demo_engines_other_than_llamacpp_and_vllm_are_a_usage_error(capsys):
    assert main(["demo", "--engines", "llama.cpp,sglang"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == (
        "servelab: error: --engines 'llama.cpp,sglang': the demo runs llama.cpp, vllm (one or both, "
        "comma-separated); not sglang\n"
    )


def test_demo_workdir_that_is_a_file_is_a_usage_error(tmp_path, capsys):
    blocker = tmp_path / "model.gguf"
    blocker.write_bytes(b"GGUF")
    assert main(["demo", "--workdir", str(blocker)]) == 2
    out, err = capsys.readouterr()
    assert (
        out == ""
        and err == f"servelab: error: --workdir {blocker}: cannot make it a directory (File exists)\n"
    )


def _check_advice(steps: dict, workdir, html: str) -> None:
    """The advice for the demo's goal, made with the calibration of these runs, beside predicted vs measured;
    memory used is each server's resident peak."""
    advice = steps["advice"]
    assert advice["available"] and advice["file"] == str(workdir / "advice.json")
    doc = json.loads((workdir / "advice.json").read_text())
    # every candidate is somewhere: meeting the goal, missing it, screened out or not fitting (which list an
    # engine lands in turns on this run's calibration, made from a few noisy requests a level)
    engines = {r["engine"] for r in doc["ranked"] + doc["missed"]} | {
        p["candidate"].split()[0] for p in doc["pruned"] + doc["screened"]
    }
    assert {"llamacpp", "vllm"} <= engines
    checks = doc["predicted_vs_measured"]
    assert {(c["engine"], c["workload"]) for c in checks} == {
        (e, w) for e in ("llamacpp", "vllm") for w in ("short", "mixed")
    }
    assert all(c["measured"] is not None and c["predicted"] is not None for c in checks)
    assert 'id="advice"' in html and "Predicted with the calibration vs measured" in html
    assert all(
        row["memory_used_bytes"] and row["memory_used_bytes"] > 1 << 20 for row in steps["bench"]["levels"]
    )


def _check_bill_of_two_engines(steps: dict, workdir, html: str) -> None:
    """From the stored runs and the rendered bill: both engines' runs exist; each engine's % of ceiling is its
    single-stream speed over its own plan entry's ceiling (plan.json holds one per engine, both for this CPU);
    the summary names the faster engine per scenario; llama.cpp's evictions are the records the bench marked."""
    from servelab.plan.io import load_plan
    from servelab.report import assemble
    from servelab.report.glance import faster_per_scenario, glance_table, tail_table
    from servelab.report.tables import fmt, share
    from servelab.store import Store

    planned = steps["plan"]
    assert planned["available"] and planned["device"] == "cpu" and planned["bandwidth_gb_s"] > 0
    doc = load_plan(planned["plan_file"])
    own = {p.engine: p for p in doc.plans}
    assert doc.gpu == "cpu" and sorted(own) == ["llamacpp", "vllm"] and own["vllm"].quant == "bf16"
    with Store.open(workdir / "runs.db", must_exist=True) as store:
        runs = [store.load_run(run_id) for run_id in steps["bench"]["run_ids"]]
    assert sorted((r.targets[0].engine, r.meta.workload.kind) for r in runs) == [
        ("llamacpp", "mixed"),
        ("llamacpp", "short"),
        ("vllm", "mixed"),
        ("vllm", "short"),
    ]
    bill = assemble(runs, doc)
    assert "No plan given" not in html
    rows = {row[0]: row for row in glance_table(bill).rows}
    for engine in bill.engines:
        ceiling = (own[engine.engine].decode_ceiling_tok_s or None).short  # type: ignore[union-attr]
        assert ceiling == planned["decode_ceilings_tok_s"][engine.engine] and ceiling > 0
        speed = engine.single_stream_tok_s
        assert speed and rows[engine.label][1] == f"{fmt(speed)} ({share(speed / ceiling)})"
        assert f"<td>{rows[engine.label][1]}</td>" in html or rows[engine.label][1] in html

    faster = faster_per_scenario(bill)
    assert [v.scenario for v in faster] == ["single user", "aggregate", "mixed-load tail"]
    labels = {e.label for e in bill.engines}
    for verdict in faster:
        assert verdict.choice in labels or (
            verdict.scenario == "mixed-load tail" and "a tie" in verdict.sentence
        )
        assert f"Faster for {verdict.scenario}: {verdict.choice or ''}" in html
    assert faster[0].choice.endswith("· short") and faster[2].sentence.count("· mixed") >= 2  # like with like

    table = tail_table(bill)
    assert table is not None and "Mixed load side by side" in html
    for run in runs:
        engine = next(e for e in bill.engines if e.run_id == run.id)
        marked = sum(1 for r in run.requests if r.phase == "measure" and r.evicted)
        assert engine.evictions == marked  # the bench's eviction signals, counted in the bill
        if engine.workload == "mixed":
            shown = [int(row[3]) for row in table.rows if row[1] == engine.label]
            assert sum(shown) == marked and len(shown) == 3
    summary = steps["summary"]
    assert {row["label"] for row in summary["engines"]} == labels
    assert [v["scenario"] for v in summary["faster"]] == [v.scenario for v in faster]


def _check_layout_in_chromium(report, tmp_path) -> None:
    """The demo's own two-engine bill in headless Chromium: no legend over a point or axis label, every point
    with its tooltip, short unique labels, nothing fetched or logged; screenshots kept (light and dark)."""
    out = _artifacts(tmp_path)
    shots = {"light": (out / "demo-bill-light.png", False), "dark": (out / "demo-bill-dark.png", True)}
    chromium = Chromium(tmp_path / "chromium-profile")
    try:
        page = asyncio.run(inspect_page(chromium, report.as_uri(), LAYOUT_JS, shots))
    finally:
        chromium.close()
    assert (
        page["exceptions"] == [] and [c for c in page["console"] if c["level"] in ("error", "warning")] == []
    )
    assert page["requests"] == [report.as_uri()]
    checks = page["checks"]
    assert sorted(checks["series"]) == sorted(
        f"{e} · {m} · {w}"
        for e, m in (("llamacpp", "llama"), ("vllm", "llama-hf"))
        for w in ("short", "mixed")
    )
    assert "Faster for mixed-load tail:" in checks["glance"] and "Mixed load side by side" in checks["glance"]
    for figure in checks["figures"]:
        assert figure["overlaps"] == [] and figure["untitled"] == 0, figure["key"]
        for texts in figure["legendTexts"]:
            assert len(set(texts)) == len(texts) and all(len(t) < 60 for t in texts), (figure["key"], texts)
    for path, _ in shots.values():
        assert path.stat().st_size > 10_000
        print(f"screenshot: {path}")

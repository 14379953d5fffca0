"""`servelab demo` end to end on this machine: a real llama-server, the project's own hybrid model."""

from __future__ import annotations

import json

import psutil

from servelab.cli.app import main


def test_demo_catches_the_divided_context_fixes_it_and_reports(
    llama_server_bin, tmp_path, capsys, monkeypatch
):
    monkeypatch.setenv("SERVELAB_LLAMA_SERVER", str(llama_server_bin))
    workdir = tmp_path / "demo"
    assert main(["demo", "--workdir", str(workdir), "--threads", "1", "--requests", "3", "--json"]) == 0
    captured = capsys.readouterr()
    steps = {step["name"]: step["outcome"] for step in json.loads(captured.out)["steps"]}

    assert steps["engine"]["llama_server"] == str(llama_server_bin)
    divided, right = steps["divided"], steps["right"]
    assert divided["args"] == ["-c", "16384", "-np", "4"]
    assert divided["context_per_slot"] == 4096 and divided["slots"] == 4
    assert any("context per slot is 4096, not 16384" in line for line in divided["mismatches"])
    assert right["context_per_slot"] == 16384 and right["mismatches"] == []
    assert (
        steps["plan"]["available"] is False
        or steps["plan"]["context_per_slot"] == divided["context_per_slot"]
    )
    assert len(steps["bench"]["run_ids"]) == 2  # short and mixed, each a 1/2/4 ladder
    levels = [(row["workload"], row["level"]) for row in steps["bench"]["levels"]]
    assert levels == [(w, f"c={c}") for w in ("short", "mixed") for c in (1, 2, 4)]
    assert all(row["completed"] == 3 and row["errors"] == 0 for row in steps["bench"]["levels"])
    assert all(row["output_tok_s"] > 0 for row in steps["bench"]["levels"])
    report = workdir / "report.html"
    assert report.is_file() and "<html" in report.read_text()[:500].lower()
    _check_bill_against_this_machine(steps, workdir, report.read_text())

    narration = captured.err
    for step in (
        "1. engine",
        "2. model",
        "3. plan",
        "4. launch",
        "5. relaunch right",
        "6. bench",
        "7. report",
    ):
        assert step in narration
    assert "MISMATCH: context per slot is 4096" in narration
    assert [p for p in psutil.Process().children(recursive=True) if "llama-server" in p.name()] == []


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
        ),
        tmp_path / "report.html",
    )
    render(result)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"-c 16384 -np 4: context per slot 4096, {mismatch}"
    assert lines[1] == "-c 16384 -np 4 --kv-unified: context per slot 16384, as asked"
    assert lines[2] == f"benchmark runs: r1, r2 in {tmp_path / 'runs.db'}"
    assert lines[3] == f"report: {tmp_path / 'report.html'}"


def test_demo_workdir_that_is_a_file_is_a_usage_error(tmp_path, capsys):
    blocker = tmp_path / "model.gguf"
    blocker.write_bytes(b"GGUF")
    assert main(["demo", "--workdir", str(blocker)]) == 2
    out, err = capsys.readouterr()
    assert (
        out == ""
        and err == f"servelab: error: --workdir {blocker}: cannot make it a directory (File exists)\n"
    )


def _check_bill_against_this_machine(steps: dict, workdir, html: str) -> None:
    """The bill is held against the plan for this machine's CPU: its % of ceiling is the measured single-stream
    speed over that plan's decode ceiling (the bandwidth this machine measured / the bytes per token)."""
    from servelab.plan.io import load_plan
    from servelab.report import assemble
    from servelab.store import Store

    planned = steps["plan"]
    assert planned["available"] and planned["device"] == "cpu" and planned["bandwidth_gb_s"] > 0
    doc = load_plan(planned["plan_file"])
    assert doc.gpu == "cpu" and doc.plans[0].engine == "llamacpp"
    ceiling = (doc.plans[0].decode_ceiling_tok_s or None).short  # type: ignore[union-attr]
    assert ceiling == planned["decode_ceiling_tok_s"] and ceiling > 0
    with Store.open(workdir / "runs.db", must_exist=True) as store:
        runs = [store.load_run(run_id) for run_id in steps["bench"]["run_ids"]]
    bill = assemble(runs, doc)
    speed = max(e.single_stream_tok_s or 0.0 for e in bill.engines)
    assert speed > 0 and bill.ceiling_short_tok_s == ceiling
    assert "No plan given" not in html
    assert (
        f"that is {speed / ceiling * 100:.0f}% of the {ceiling:.1f} tok/s bandwidth ceiling of the plan"
        in html
    )

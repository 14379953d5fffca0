"""`servelab plan`'s verdict answers the question asked (issue 23 item 2): with --engine and --quant the launch as
asked (the engine's defaults for what is not given) is the plan; when it does not fit, `fits` is false, the reason
is shown and `fits_with` names the engine's flags that make it fit, in the table, the JSON and a saved plan. A
comparison (no --engine/--quant) searches, says so, and names what each row added to the engine's defaults."""

from __future__ import annotations

import json
from pathlib import Path

from servelab.cli.app import main
from servelab.plan.io import load_plan
from servelab.sizing.types import Plan

QWEN_48G = ["plan", "Qwen/Qwen3.5-27B", "--gpu", "rtx4090-48g"]
ASKED = [*QWEN_48G, "--engine", "sglang", "--quant", "awq"]  # no --kv-dtype: sglang's 16-bit cache


def test_a_launch_that_does_not_fit_as_asked_says_so_and_names_the_flags(capsys) -> None:
    assert main(ASKED) == 0  # as for any plan that does not fit: the answer is the output, not the status
    out = capsys.readouterr().out
    assert "does NOT fit: context 262144 tokens asked, 203715 served; KV auto" in out
    assert "does not fit as asked: sglang: the KV pool holds 203715 tokens" in out
    assert "fits with: --kv-cache-dtype fp8_e5m2 (add to the command)" in out
    assert "searched:" not in out  # before: the fp8 variant, "fits", the change only under "searched"


def test_the_json_verdict_is_the_launch_as_asked_with_the_remedy(capsys) -> None:
    assert main([*ASKED, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    plan = doc["plans"][0]
    assert doc["search"] is False and plan["fits"] is False and plan["kv_dtype"] == "auto"
    assert plan["searched"] == []
    assert plan["fits_with"] == ["--kv-cache-dtype", "fp8_e5m2"]
    assert plan["refusals"] and "--kv-cache-dtype" not in plan["command"]
    assert main([*ASKED, "--kv-dtype", "fp8_e5m2", "--json"]) == 0  # the remedy taken: it fits, no remedy
    taken = json.loads(capsys.readouterr().out)["plans"][0]
    assert taken["fits"] is True and taken["fits_with"] == []


def test_a_launch_nothing_rescues_says_what_to_change_instead(capsys) -> None:
    assert main([*ASKED[:-1], "bf16", "--context", "32768"]) == 0
    out = capsys.readouterr().out
    assert "does not fit as asked:" in out
    assert "no KV dtype or engine setting makes it fit: lower --context" in out


def test_a_comparison_searches_says_so_and_names_each_rows_flags(capsys) -> None:
    assert main([*QWEN_48G, "--engine", "sglang"]) == 0
    out = capsys.readouterr().out
    assert "searched: each row is its engine x format's best fitting variant" in out
    assert "with flags" in out  # the fits column of a row whose defaults do not fit
    assert "sglang awq-w4g128: its defaults do not fit; fits with --kv-cache-dtype fp8_e5m2" in out
    assert main([*QWEN_48G, "--engine", "sglang", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["search"] is True  # the JSON says it searched too
    rows = {p["quant"]: p for p in doc["plans"]}
    awq = rows["awq-w4g128"]
    assert awq["fits"] is True and awq["fits_with"] == ["--kv-cache-dtype", "fp8_e5m2"]
    assert awq["command"][-2:] == awq["fits_with"]  # the variant already carries them


def test_a_saved_plan_keeps_the_remedy(tmp_path: Path, capsys) -> None:
    saved = tmp_path / "plan.json"
    assert main([*ASKED, "--save", str(saved), "--json"]) == 0
    capsys.readouterr()
    entry = json.loads(saved.read_text())["plans"][0]
    assert Plan.from_json(entry).fits_with == ("--kv-cache-dtype", "fp8_e5m2")
    read = load_plan(saved).plans[0]
    assert read.fits is False and read.fits_with == ("--kv-cache-dtype", "fp8_e5m2")


def test_plans_saved_before_the_remedy_still_load() -> None:
    for path in sorted((Path(__file__).parents[1] / "fixtures" / "plans").glob("*.json")):
        entry = json.loads(path.read_text())["plans"][0]
        assert "fits_with" not in entry
        assert Plan.from_json(entry).fits_with == ()
        assert load_plan(path).plans[0].fits_with is None


def test_a_launch_command_gets_the_same_verdict_and_remedy(capsys) -> None:
    # `plan --cmd`: exactly that launch; vLLM's default 256 sequences exceed the Mamba blocks on a 24 GB card
    launch = "vllm serve Qwen/Qwen3.5-27B --quantization awq --max-model-len 32768"
    assert main(["plan", "--gpu", "rtx4090", "--cmd", launch, "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)["plans"][0]
    assert plan["fits"] is False and plan["fits_with"][0] == "--max-num-seqs"
    assert "--max-num-seqs" not in plan["command"]  # the launch as written, the remedy beside it

"""Adding an engine is one package and one registry line: a toy engine from the test suite (tests/toy_engine),
registered by replacing ``registry.REGISTRY``, is seen by plan, verify --cmd, logs, bench target detection and
serve, with no other servelab file touched."""

from __future__ import annotations

import json

import pytest

from servelab.cli.app import main
from servelab.engines import registry
from servelab.engines.base import normalise
from tests.bench_sim import sim_process
from tests.toy_engine.engine import ENGINE as TOY


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> None:
    # before the generic OpenAI-compatible engine, which claims every server, as the registry's order says
    monkeypatch.setattr(registry, "REGISTRY", (TOY, *registry.REGISTRY))


def test_the_registry_spells_names_one_way() -> None:
    assert (
        registry.get_engine("llama.cpp")
        is registry.get_engine("LlamaCpp")
        is registry.get_engine("llama-cpp")
    )
    assert normalise("llama.cpp") == "llamacpp" and registry.fallback().name == "openai"
    # the key results, plans and bands file an engine under; a name the registry does not know stays as given
    assert [registry.registry_name(s) for s in ("llama.cpp", "SGLang", "*", "tgi")] == [
        "llamacpp",
        "sglang",
        "*",
        "tgi",
    ]
    with pytest.raises(Exception, match="unknown engine 'toy'"):
        registry.get_engine("toy")


def test_plan_plans_the_toy_engine(toy, capsys) -> None:
    code = main(
        ["plan", "Qwen/Qwen3-8B", "--engine", "toyserve", "--quant", "bf16", "--context", "4096", "--json"]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    plan = json.loads(out)["plans"][0]
    assert plan["engine"] == "toy" and plan["details"] == {"slots": 1, "context": 4096, "step_tokens": 256}
    assert plan["command"][:4] == ["toy-server", "Qwen/Qwen3-8B", "--ctx", "4096"]
    assert plan["efficiency"] == {"decode": 0.5, "decode_kv": 0.5, "prefill": 0.25}  # its table's default


def test_plan_all_compares_the_toy_engine_too(toy, capsys) -> None:
    assert main(["plan", "Qwen/Qwen3-8B", "--quant", "bf16", "--context", "4096", "--json"]) == 0
    engines = {p["engine"] for p in json.loads(capsys.readouterr().out)["plans"]}
    assert {"toy", "sglang", "vllm"} <= engines


def test_verify_cmd_detects_reads_and_explains_with_the_toy_rules(toy, capsys) -> None:
    with sim_process("--context", "2048") as url:
        code = main(["verify", url, "--cmd", "toy-server m --ctx 4096", "--json", "--strict"])
    out, err = capsys.readouterr()
    assert code == 1, err  # --strict: a mismatch fails
    doc = json.loads(out)
    assert doc["engine"] == "toy" and doc["version"] == "0.1-toy"
    [mismatch] = doc["mismatches"]
    assert mismatch["key"] == "context" and "caps --ctx" in mismatch["line"]


def test_logs_knows_the_toy_line(toy, tmp_path, capsys) -> None:
    log = tmp_path / "toy.log"
    log.write_text("starting\ntoy: all 4 slots busy, request queued\n")
    assert main(["logs", str(log), "--engine", "toy", "--json"]) == 0
    findings = json.loads(capsys.readouterr().out)["findings"]
    assert [f["id"] for f in findings] == ["toy.slot_starved"]
    assert "4 toy slots" in findings[0]["meaning"]


def test_bench_detects_the_toy_target_and_stores_its_name(toy, tmp_path, capsys) -> None:
    with sim_process("--ttft-ms", "1", "--itl-ms", "1") as url:
        code = main(
            [
                "bench",
                url,
                "--concurrency",
                "1",
                "--requests",
                "2",
                "--output-tokens",
                "3",
                "--input-tokens",
                "8",
                "--db",
                str(tmp_path / "r.db"),
                "--json",
            ]
        )
    out, err = capsys.readouterr()
    assert code == 0, err
    [target] = json.loads(out)["targets"]
    assert target["engine"] == "toy" and target["levels"][0]["completed"] == 2


def test_serve_says_the_toy_binary_is_missing(toy, monkeypatch, capsys) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    assert main(["serve", "toy", "m"]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.splitlines() == [
        "starting ToyServe on m …",
        "servelab: error: ToyServe is not installed (no `toy-server` on PATH)",
    ]


def _ttft_ms(capsys, args: list[str]) -> float:
    assert main(args) == 0, capsys.readouterr().err
    level = json.loads(capsys.readouterr().out)["targets"][0]["levels"][0]
    return float(level["ttft_ms"]["p50"])


def test_the_toy_engines_own_setting_plans_emits_verifies_and_predicts(toy, tmp_path, capsys) -> None:
    """A knob of the toy's own (--step-tokens, tests/toy_engine/settings.py) goes through plan, the recipe, verify
    and predict with nothing outside the toy's package naming it."""
    ask = ["Qwen/Qwen3-8B", "--engine", "toy", "--quant", "bf16", "--context", "4096"]
    saved = tmp_path / "plan.json"
    assert main(["plan", *ask, "--json", "--save", str(saved), "--", "--step-tokens", "64"]) == 0
    plan = json.loads(capsys.readouterr().out)["plans"][0]
    assert plan["details"] == {"slots": 1, "context": 4096, "step_tokens": 64}
    assert main(["plan", *ask, "--emit", "cmd", "--", "--step-tokens", "64"]) == 0
    assert "--ctx 4096 --step-tokens 64" in capsys.readouterr().out
    assert main(["plan", *ask, "--", "--step-tokens", "0"]) == 2  # the toy's Settings validate it
    err = capsys.readouterr().err
    assert (
        err.strip() == "servelab: error: --step-tokens must be a whole number from 1 to 4,096 tokens, got 0"
    )

    with sim_process("--context", "4096", "--model", "m@step=32") as url:
        code = main(
            ["verify", url, "--cmd", "toy-server m --ctx 4096 --step-tokens 64", "--json", "--strict"]
        )
    doc = json.loads(capsys.readouterr().out)
    assert code == 1 and doc["effective"]["step_tokens"] == 32  # what only a toy server reports
    [mismatch] = doc["mismatches"]
    assert mismatch["key"] == "step_tokens" and mismatch["line"] == (
        "tokens a step is 32, not 64: the toy server was started with another budget; "
        "restart it with --step-tokens 64"
    )

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
    small = _ttft_ms(capsys, ["predict", "--plan", str(saved), *load])  # 16 steps of 64 prompt tokens
    assert _ttft_ms(capsys, ["predict", *ask, *load, "--", "--step-tokens", "64"]) == small  # virtual time
    large = _ttft_ms(capsys, ["predict", *ask, *load, "--", "--step-tokens", "1024"])  # one step
    assert small > 1.2 * large  # each of the 16 steps reads the weights again

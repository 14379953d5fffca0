"""`servelab plan --gpu cpu` through the CLI on this machine: the probe runs once, is cached, is redone on
--remeasure, survives a corrupt cache; vLLM's KV space from --kv-cache-space or VLLM_CPU_KVCACHE_SPACE."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servelab.cli.app import main
from servelab.hardware import bandwidth
from tests.unit.test_plan_cpu_device import LLAMA


@pytest.fixture
def config(tmp_path: Path) -> str:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(LLAMA))
    return str(path)


def _plan(capsys, *args: str) -> dict:
    assert main(["plan", "--json", *args]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    return json.loads(out)


@pytest.mark.usefixtures("measured_host")
def test_plan_on_cpu_says_what_was_measured_and_when(config, capsys) -> None:
    assert (
        main(["plan", config, "--gpu", "cpu", "--engine", "vllm", "--quant", "bf16", "--context", "2048"])
        == 0
    )
    out, err = capsys.readouterr()
    assert err == "" and "host memory" in out
    assert "device: host memory bandwidth" in out and "GB/s measured" in out and "peak estimated" in out
    assert "kv_tokens=524288" in out and "max_concurrency=256.0" in out


def test_cache_reused_then_remeasured(config, capsys) -> None:
    args = [config, "--gpu", "cpu", "--engine", "vllm", "--context", "2048"]
    first = _plan(capsys, *args)["plans"][0]["device_note"]
    stamp = json.loads(bandwidth.cache_path().read_text())
    assert _plan(capsys, *args)["plans"][0]["device_note"] == first
    _plan(capsys, *args, "--remeasure")
    assert json.loads(bandwidth.cache_path().read_text()) != stamp  # new repeats (and time) stored


def test_corrupt_cache_is_measured_again_without_a_traceback(config, capsys) -> None:
    path = bandwidth.cache_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('{"version": 1, "machines": {"x": ')
    doc = _plan(capsys, config, "--gpu", "cpu", "--engine", "vllm", "--context", "2048")
    assert doc["gpu"] == "cpu" and "measured" in doc["plans"][0]["device_note"]
    assert json.loads(path.read_text())["version"] == bandwidth.CACHE_VERSION


@pytest.mark.usefixtures("measured_host")
def test_kv_space_from_the_words_after_dashes_and_environment(config, capsys, monkeypatch) -> None:
    args = [config, "--gpu", "cpu", "--engine", "vllm", "--context", "2048"]
    spaced = _plan(capsys, *args, "--", "VLLM_CPU_KVCACHE_SPACE=2")
    assert spaced["plans"][0]["details"]["kv_tokens"] == 1_048_576
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "3")
    assert _plan(capsys, *args)["plans"][0]["details"]["VLLM_CPU_KVCACHE_SPACE"] == 3
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "lots")
    assert main(["plan", *args]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "VLLM_CPU_KVCACHE_SPACE='lots'" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.usefixtures("measured_host")
def test_an_engine_without_cpu_rules_is_one_line(config, capsys) -> None:
    assert main(["plan", config, "--gpu", "cpu", "--engine", "sglang"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "does not plan sglang on a CPU" in err and len(err.strip().splitlines()) == 1

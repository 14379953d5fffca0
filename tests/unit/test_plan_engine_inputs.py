"""Two inputs the memory rules already took, now told to the planner through the engines' own Settings (issue 23
items 1-2): sglang's --attention-backend (its ROCm aiter factor on mem_fraction_static) and vLLM's VLLM_USE_V1 (V1
opted into on 0.7.x: its defaults and profile run). Read by each engine's command-line reader from the words after
`--` (VLLM_USE_V1 as a `NAME=value` word, or the environment), checked where read."""

from __future__ import annotations

import json

import pytest

from servelab.cli.app import main
from servelab.engines.sglang import cmdline as sglang
from servelab.engines.vllm import cmdline as vllm
from servelab.errors import ConfigError
from servelab.hardware.gpus import find_gpu
from servelab.model.load import load_model
from servelab.plan.make import make_plan
from tests.real_logs import load_cases, not_expressed, plan_inputs, run_plan


def test_the_readers_take_the_two_words() -> None:
    assert sglang.settings(["--attention-backend", "triton"]).attention_backend == "triton"
    assert sglang.settings([]).attention_backend is None
    assert vllm.settings([], {"VLLM_USE_V1": "1"}).use_v1 is True
    assert vllm.settings([], {"VLLM_USE_V1": "0"}).use_v1 is False
    assert vllm.settings([], {"VLLM_USE_V1": "2"}).use_v1 is True  # bool(int(...)), as vllm/envs.py reads it
    assert vllm.settings([], {}).use_v1 is None


@pytest.mark.parametrize(
    ("read", "words", "environment", "message"),
    [
        (
            vllm.settings,
            [],
            {"VLLM_USE_V1": "yes"},
            "VLLM_USE_V1='yes': vLLM reads an integer (0: V0, 1: V1)",
        ),
        (sglang.settings, ["--attention-backend", "a b"], {}, "sglang --attention-backend 'a b': give one"),
    ],
)
def test_a_bad_value_is_one_line(read, words, environment, message) -> None:
    with pytest.raises(ConfigError) as caught:
        read(words, environment)
    assert "\n" not in str(caught.value) and message in str(caught.value)


def test_sglang_on_rocm_scales_the_fraction_only_for_aiter() -> None:
    # Qwen3-8B (MHA) on an MI300X at 32,768 tokens: sglang's ROCm default backend is aiter, x 0.85 from
    # 0.5.4.post2; --attention-backend triton keeps the fraction (docs/reference/memory.md, sglang on ROCm)
    model, card = load_model("Qwen/Qwen3-8B"), find_gpu("mi300x")
    common = {"engine": "sglang", "quant": "bf16", "context": 32768}
    default = make_plan(model, card, **common)
    aiter = make_plan(model, card, attention_backend="aiter", **common)
    triton = make_plan(model, card, attention_backend="triton", **common)
    assert default.details == aiter.details
    fraction = triton.details["mem_fraction_static"]
    assert default.details["mem_fraction_static"] == pytest.approx(0.85 * fraction)  # type: ignore[operator]
    assert triton.memory_bytes.kv_cache > default.memory_bytes.kv_cache
    assert triton.command[-2:] == ("--attention-backend", "triton")  # the recipe keeps what was asked
    cuda = find_gpu("h100-sxm")  # no aiter factor off ROCm, whatever the backend
    assert (
        make_plan(model, cuda, attention_backend="triton", **common).details
        == make_plan(model, cuda, **common).details
    )


def test_vllm_0_7_with_v1_opted_in_plans_v1s_defaults() -> None:
    # 0.7.x runs V0 unless VLLM_USE_V1=1; V1 there: max_num_seqs 1024, no sampler warm-up in its profile run
    model, card = load_model("Qwen/Qwen3-8B"), find_gpu("h100-sxm")
    common = {"engine": "vllm", "quant": "bf16", "context": 8192, "engine_version": "0.7.3"}
    v0 = make_plan(model, card, **common)
    v1 = make_plan(model, card, use_v1=True, **common)
    assert (v0.details["max_num_seqs"], v1.details["max_num_seqs"]) == (256, 1024)
    assert v1.memory_bytes.activations < v0.memory_bytes.activations
    assert make_plan(model, card, use_v1=False, **common) == v0  # VLLM_USE_V1=0: the release's default there


def test_the_cli_passes_them_after_the_double_dash(capsys) -> None:
    base = [
        "plan",
        "Qwen/Qwen3-8B",
        "--gpu",
        "h100-sxm",
        "--engine",
        "vllm",
        "--quant",
        "bf16",
        "--context",
        "8192",
    ]
    assert main([*base, "--engine-version", "0.7.3", "--json", "--", "VLLM_USE_V1=1"]) == 0
    assert json.loads(capsys.readouterr().out)["plans"][0]["details"]["max_num_seqs"] == 1024
    rocm = ["plan", "Qwen/Qwen3-8B", "--gpu", "mi300x", "--engine", "sglang", "--quant", "bf16", "--json"]
    assert main([*rocm, "--", "--attention-backend", "triton"]) == 0
    assert "--attention-backend" in json.loads(capsys.readouterr().out)["plans"][0]["command"]


def test_the_kimi_mi355x_case_is_planned_with_the_backend_it_ran() -> None:
    case = next(c for c in load_cases() if c.name == "sglang/kimi-k2.5-tp8-mi355x-mla")
    assert plan_inputs(case)["attention_backend"] == "triton" and "attention_backend" not in not_expressed(
        case
    )
    plan = run_plan(case)
    assert plan.details["mem_fraction_static"] == case.settings["mem_fraction_static"]  # no aiter factor
    v1 = next(c for c in load_cases() if c.name == "vllm/v1-0.7-llama31-70b-w8a8-gpu-blocks")
    assert plan_inputs(v1)["use_v1"] is True  # VLLM_USE_V1=1 before `vllm serve` in the case's command

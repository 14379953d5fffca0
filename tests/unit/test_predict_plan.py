"""The emulator fed by the planner alone (no calibration): the field report's qualitative findings."""

from __future__ import annotations

import pytest

from servelab.cli.bench import build_config
from servelab.hardware.gpus import card_for
from servelab.model.load import load_model
from servelab.plan.make import search_plan
from servelab.predict.machine import emulated_engine
from servelab.predict.run import PredictTarget, predict
from servelab.results.level_key import Level
from servelab.scheduling.core import Speculation
from servelab.speculative.theory import expected_tokens_per_step, predicted_speedup


def ladder(engine, workload: str, concurrency: str, requests: int = 16):
    config = build_config(
        {
            "targets": ["predict"],
            "concurrency": concurrency,
            "workload": workload,
            "requests": requests,
            "chat": True,
        },
        None,
    )
    result = predict(config, engine, PredictTarget(engine=engine.engine, model="m", gpu="g", quant="q"))
    return {lv.stats.level: lv.stats for lv in result.targets[0].levels}


def test_tp2_host_staged_decodes_one_stream_slower_than_one_card() -> None:
    """docs/reference/field-report.md §1-2: sglang TP 2 over host-staged PCIe vs one 48 GB 4090, AWQ."""
    model, card = load_model("Qwen/Qwen3.5-27B"), card_for("rtx4090-48g")
    common = dict(engine="sglang", quant="awq", context=32768, kv_dtype="fp8_e5m2")
    one = search_plan(model, card, **common)
    two = search_plan(model, card, gpus=2, interconnect="pcie-host-staged", **common)
    assert one.fits and two.fits and two.tensor_parallel == 2
    tpot = {}
    for name, plan in (("one", one), ("two", two)):
        stats = ladder(emulated_engine(plan, model, card), "short", "1", requests=4)[Level.closed(1)]
        tpot[name] = stats.tpot_ms.p50
    assert tpot["two"] > tpot["one"]


def test_continuous_batching_keeps_its_tpot_tail_tighter_than_llamacpp_slots_under_mixed_load() -> None:
    """The same model in the same 16-bit weights, 8 clients, 1 long prompt for every 3 short ones: the long
    prompts stretch llama.cpp's unified batch, so its p99 TPOT sits further above its median than vLLM's.
    (The tail is compared relative to each engine's median: the absolute p99 also carries each engine's decode
    efficiency from the sourced table, where llama.cpp's 16-bit batch-8 cell falls back to its batch-1 figure.)"""
    model, card = load_model("Qwen/Qwen3-8B"), card_for("rtx4090")
    vllm = search_plan(model, card, engine="vllm", quant="bf16", context=8192)
    llama = search_plan(model, card, engine="llamacpp", quant="bf16", context=8192, parallel=8)
    level = Level.closed(8)
    tail = {}
    for plan in (vllm, llama):
        tpot = ladder(emulated_engine(plan, model, card), "mixed", "8", requests=32)[level].tpot_ms
        tail[plan.engine] = tpot.p99 / tpot.p50
    assert tail["vllm"] < tail["llamacpp"]


def test_speculative_decoding_speeds_decode_up_as_the_theory_says() -> None:
    """Memory-bound verify of 1 + gamma tokens costs about one step: the single-stream speed-up is close to
    Leviathan et al.'s E / (gamma c + 1) (speculative/theory.py); the same tokens come out."""
    model, card = load_model("Qwen/Qwen3-8B"), card_for("rtx4090")
    plan = search_plan(model, card, engine="vllm", quant="bf16", context=8192)
    alpha, gamma, cost = 0.8, 4, 0.05
    spec = emulated_engine(
        plan, model, card, speculation=Speculation(gamma, expected_tokens_per_step(alpha, gamma), cost)
    )
    fast = ladder(spec, "short", "1", requests=4)[Level.closed(1)]
    slow = ladder(emulated_engine(plan, model, card), "short", "1", requests=4)[Level.closed(1)]
    assert fast.tokens.output == slow.tokens.output
    assert slow.tpot_ms.p50 / fast.tpot_ms.p50 == pytest.approx(
        predicted_speedup(alpha, gamma, cost), rel=0.05
    )

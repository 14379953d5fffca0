"""The closed-loop load of `servelab predict` (servelab/predict/virtual_ladder.py) against an emulated engine."""

from __future__ import annotations

import statistics
from dataclasses import replace
from functools import partial

from servelab.bench.level_counts import prompt_count
from servelab.bench.workloads import build_prompts
from servelab.cli.bench import build_config
from servelab.engines.llamacpp.scheduler import Slots, SlotSettings
from servelab.hardware.gpus import card_for
from servelab.model.load import load_model
from servelab.plan.make import search_plan
from servelab.predict.machine import emulated_engine
from servelab.predict.virtual_ladder import CLIENT_TURNAROUND_S, predict_ladder
from servelab.predict.words import WordTokenizer


def two_slots_one_step_apart():
    """llama.cpp with 2 slots and n_batch 200: two 128-token prompts sent together take two steps, so the
    second answer ends one decode step after the first."""
    model, card = load_model("meta-llama/Llama-3.2-1B"), card_for("rtx4090")
    plan = search_plan(model, card, engine="llamacpp", quant="bf16", context=1024, parallel=2)
    engine = emulated_engine(plan, model, card)
    settings = SlotSettings(slots=2, context_per_slot=1024, n_batch=200, n_ubatch=200)
    return replace(engine, new_scheduler=partial(Slots, settings))


def test_a_clients_next_request_waits_for_the_step_the_busy_engine_already_started() -> None:
    engine = two_slots_one_step_apart()
    config = build_config(
        {"targets": ["predict"], "concurrency": "2", "workload": "short", "requests": 2, "chat": False}, None
    )
    tokenizer = WordTokenizer()
    prompts = build_prompts(config.workload, prompt_count(config), tokenizer, engine.context)
    _, (records,) = predict_ladder(engine, config, prompts, tokenizer, label="t", model="m")
    first, second = sorted((r for r in records if r.phase == "warmup"), key=lambda r: r.end_ns)
    assert second.end_ns > first.end_ns  # the staggered answers this test is about
    successor = min((r for r in records if r.phase == "measure"), key=lambda r: r.sent_ns)
    assert successor.sent_ns == first.end_ns + round(CLIENT_TURNAROUND_S * 1e9)
    # the other answer's last decode step ran without the new prompt in it: a decode-sized gap, not a prefill
    gaps = [b - a for a, b in zip(second.chunk_ns, second.chunk_ns[1:], strict=False)]
    assert gaps[-1] < 1.5 * statistics.median(gaps)
    assert successor.first_token_ns > second.end_ns  # its prefill is in the step after that one

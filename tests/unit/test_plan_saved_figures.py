"""Saved plans from before the engines owned their figures (tests/fixtures/plans: `servelab plan … --save` of commit
68c54d3) still load: each entry's `details` reads back as its engine's typed Figures, writes back unchanged, and
predict builds the engine's scheduler from it; a missing figure is one line naming it, not a silent default."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servelab.engines import registry
from servelab.engines.llamacpp.settings import LlamaCppFigures
from servelab.engines.vllm.settings import VllmFigures
from servelab.errors import ConfigError
from servelab.hardware.gpus import find_gpu
from servelab.model.load import load_model
from servelab.predict.machine import emulated_engine
from servelab.sizing.types import Plan

PLANS = sorted((Path(__file__).parents[1] / "fixtures" / "plans").glob("*.json"))


@pytest.mark.parametrize("path", PLANS, ids=lambda p: p.stem)
def test_a_saved_plan_reads_back_as_its_engines_figures(path: Path) -> None:
    entry = json.loads(path.read_text())["plans"][0]
    plan = Plan.from_json(entry)
    planner = registry.get_engine(plan.engine).planner
    assert planner is not None
    figures = planner.figures_type.from_json(plan.details)
    assert figures.to_json() == entry["details"]  # keys, values and their order
    engine = emulated_engine(plan, load_model("Qwen/Qwen3-8B"), find_gpu("rtx4090"))
    assert engine.new_scheduler().has_work() is False


def test_the_schedulers_read_the_saved_figures() -> None:
    plans = {p.stem: Plan.from_json(json.loads(p.read_text())["plans"][0]) for p in PLANS}
    spec, card = load_model("Qwen/Qwen3-8B"), find_gpu("rtx4090")
    slots = emulated_engine(plans["qwen3-8b-llamacpp-rtx4090"], spec, card).new_scheduler()
    assert (len(slots.slots), slots.settings.context_per_slot, slots.settings.n_ubatch) == (2, 8192, 512)  # type: ignore[attr-defined]
    vllm = emulated_engine(plans["qwen3-8b-vllm-rtx4090"], spec, card).new_scheduler()
    assert (vllm.settings.max_running, vllm.settings.total_blocks) == (2, 7030)  # type: ignore[attr-defined]
    cpu = VllmFigures.from_json(plans["qwen3-8b-vllm-cpu"].details)
    assert (cpu.kv_cache_space_gib, cpu.max_num_batched_tokens, cpu.gpu_memory_utilization) == (1, None, None)


def test_a_missing_figure_is_one_line_naming_it() -> None:
    details = json.loads(PLANS[0].read_text())["plans"][0]["details"]
    del details["n_ctx_per_slot"]
    with pytest.raises(ConfigError, match=r"^details lacks n_ctx_per_slot$"):
        LlamaCppFigures.from_json(details)
    with pytest.raises(ConfigError, match=r"details\.n_parallel is a string, not an integer"):
        LlamaCppFigures.from_json({**details, "n_ctx_per_slot": 1, "n_parallel": "2"})

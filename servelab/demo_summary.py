"""The demo's closing summary, taken from the bill it rendered: per engine and workload the figures the bill
opens with (each against that engine's own plan), and the faster engine per scenario."""

from __future__ import annotations

from typing import Any

from servelab.report.data import Bill, EngineSummary
from servelab.report.glance import faster_per_scenario


def _top(engine: EngineSummary) -> dict[str, Any]:
    """The tail at the highest concurrency the engine measured."""
    top = max(engine.closed_loop, key=lambda lv: lv.concurrency or 0, default=None)
    if top is None:
        return {"top_level": None, "ttft_p99_ms": None, "tpot_p99_ms": None}
    return {
        "top_level": top.label,
        "ttft_p99_ms": top.stats.ttft_ms.p99,
        "tpot_p99_ms": top.stats.tpot_ms.p99,
    }


def engine_row(engine: EngineSummary) -> dict[str, Any]:
    ceiling = engine.planned.ceiling_short_tok_s
    speed, best = engine.single_stream_tok_s, engine.best_aggregate
    return {
        "label": engine.label,
        "engine": engine.engine,
        "workload": engine.workload,
        "single_tok_s": speed,
        "ceiling_tok_s": ceiling,
        "single_of_ceiling": speed / ceiling if speed is not None and ceiling else None,
        "best_aggregate_tok_s": best.aggregate_tok_s if best else None,
        "best_at": best.label if best else None,
        "evictions": engine.evictions,
        **_top(engine),
    }


def summary(bill: Bill) -> dict[str, Any]:
    return {
        "engines": [engine_row(e) for e in bill.engines],
        "faster": [
            {"scenario": v.scenario, "choice": v.choice, "sentence": v.sentence}
            for v in faster_per_scenario(bill)
        ],
    }


def with_memory(bill: Any, memory: dict[str, int]) -> Any:
    """The bill with each engine's memory used taken from its server's resident peak where the run did not
    record one (a CPU engine has no GPU memory samples)."""
    from dataclasses import replace

    engines = tuple(
        e
        if e.memory_used_bytes is not None or e.run_id not in memory
        else replace(e, memory_used_bytes=memory[e.run_id])
        for e in bill.engines
    )
    return replace(bill, engines=engines)

"""The bill at a glance: the field report's table (one row per engine/configuration, each figure beside its
ceiling) and, for several engines, the faster one per scenario.

Pure: reads the `Bill` and the verdicts of `verdict.py`; the page places the result at the top.
"""

from __future__ import annotations

from servelab.report.bound import power_bounds
from servelab.report.data import Bill, EngineSummary
from servelab.report.levels import LevelFigures
from servelab.report.tables import TableData, fmt, fmt_bytes, share
from servelab.report.verdict import ScenarioVerdict, engine_verdict

GLANCE_HEADERS = (
    "engine · model · workload",
    "single-user decode tok/s (of ceiling)",
    "best aggregate tok/s @ concurrency (of ceiling)",
    "usable context / request (of planned)",
    "memory used / planned",
    "verdict",
)


def _of(value: float | None, ceiling: float | None) -> str:
    return "" if value is None or not ceiling else f" ({share(value / ceiling)})"


def single_cell(bill: Bill, engine: EngineSummary) -> str:
    speed = engine.single_stream_tok_s
    return fmt(speed) + _of(speed, engine.planned.ceiling_short_tok_s)


def aggregate_cell(bill: Bill, engine: EngineSummary) -> str:
    best = engine.best_aggregate
    if best is None:
        return "—"
    ceiling = engine.planned.batch_ceilings_tok_s.get(best.concurrency or 0)
    return f"{fmt(best.aggregate_tok_s)} @ c={best.concurrency}" + _of(best.aggregate_tok_s, ceiling)


def context_cell(bill: Bill, engine: EngineSummary) -> str:
    return fmt(engine.usable_context) + _of(engine.usable_context, engine.planned.planned_context)


def memory_cell(bill: Bill, engine: EngineSummary) -> str:
    used, planned = engine.memory_used_bytes, engine.planned.planned_total_bytes
    return f"{fmt_bytes(used)} / {fmt_bytes(planned)}" + _of(used, planned)


def glance_table(bill: Bill) -> TableData:
    """Per engine/configuration: value and share of the plan's ceiling, and the one-sentence verdict."""
    bounds = {b.label: b for b in power_bounds(bill)[1]}
    rows = tuple(
        (
            e.label + (" (partial run)" if e.partial else ""),
            single_cell(bill, e),
            aggregate_cell(bill, e),
            context_cell(bill, e),
            memory_cell(bill, e),
            engine_verdict(bill, e, bounds.get(e.label)),
        )
        for e in bill.engines
    )
    return TableData("summary", "At a glance, per engine / configuration", GLANCE_HEADERS, rows)


def _versus(best: float, others: list[float], unit: str, higher_is_better: bool = True) -> str:
    if not others:
        return f"{best:,.1f} {unit}"
    runner = max(others) if higher_is_better else min(others)
    ratio = best / runner if higher_is_better else runner / best
    return f"{best:,.1f} vs {runner:,.1f} {unit}, {ratio:.2f}×" if runner else f"{best:,.1f} {unit}"


SAME_WORK = "short"  # single user and aggregate: compared on the workload every engine ran alike
MIXED_WORK = "mixed"  # the tail: short chats with long documents among them


def comparable(bill: Bill, workload: str) -> tuple[EngineSummary, ...]:
    """The engines/configurations a scenario compares: those that ran ``workload`` where two or more did
    (the same prompts for each), else all of them."""
    same = tuple(e for e in bill.engines if e.workload == workload)
    return same if len(same) >= 2 else bill.engines


def _faster_single(bill: Bill) -> ScenarioVerdict | None:
    speeds = {e.label: e.single_stream_tok_s for e in comparable(bill, SAME_WORK) if e.single_stream_tok_s}
    if len(speeds) < 2:
        return None
    best = max(speeds, key=lambda k: speeds[k])
    others = [v for k, v in speeds.items() if k != best and v]
    return ScenarioVerdict("single user", best, f"{best} ({_versus(speeds[best] or 0.0, others, 'tok/s')})")


def _faster_aggregate(bill: Bill) -> ScenarioVerdict | None:
    tops = {e.label: e.best_aggregate for e in comparable(bill, SAME_WORK) if e.best_aggregate is not None}
    if len(tops) < 2:
        return None
    best = max(tops, key=lambda k: tops[k].aggregate_tok_s)
    others = [lv.aggregate_tok_s for k, lv in tops.items() if k != best and lv]
    level = tops[best]
    return ScenarioVerdict(
        "aggregate",
        best,
        f"{best} ({_versus(level.aggregate_tok_s if level else 0.0, others, 'tok/s')} "
        f"at their best concurrency)",
    )


def _top_common_level(engines: tuple[EngineSummary, ...]) -> int | None:
    common = (
        set.intersection(*({lv.concurrency for lv in e.closed_loop} for e in engines)) if engines else set()
    )
    common.discard(None)
    return max((c for c in common if c is not None), default=None)


def _at(engine: EngineSummary, concurrency: int) -> LevelFigures:
    return next(lv for lv in engine.closed_loop if lv.concurrency == concurrency)


def _faster_tail(bill: Bill) -> ScenarioVerdict | None:
    """Lowest TTFT p99 at the highest concurrency every engine measured, on the mixed workload where two or
    more ran it: the tail a loaded server shows; the TPOT p99 of each beside it."""
    engines = comparable(bill, MIXED_WORK)
    top = _top_common_level(engines)
    if len(engines) < 2 or top is None:
        return None
    tails = {e.label: _at(e, top).stats.ttft_ms.p99 for e in engines}
    known = {k: v for k, v in tails.items() if v is not None}
    if len(known) < 2:
        return None
    tpots = ", ".join(f"{e.label} {fmt(_at(e, top).stats.tpot_ms.p99, 1)} ms" for e in engines)
    best = min(known, key=lambda k: known[k])
    others = [v for k, v in known.items() if k != best]
    if min(others) <= known[best] * 1.005:
        return ScenarioVerdict(
            "mixed-load tail",
            None,
            f"a tie (TTFT p99 at c={top}: {known[best]:,.1f} ms each; TPOT p99 {tpots})",
        )
    return ScenarioVerdict(
        "mixed-load tail",
        best,
        f"{best} (TTFT p99 at c={top}: "
        f"{_versus(known[best], others, 'ms', higher_is_better=False)} lower; TPOT p99 {tpots})",
    )


def faster_per_scenario(bill: Bill) -> list[ScenarioVerdict]:
    """With two or more engines/configurations: the faster one for one user, for aggregate throughput and
    for the tail under load."""
    if len(bill.engines) < 2:
        return []
    return [v for v in (_faster_single(bill), _faster_aggregate(bill), _faster_tail(bill)) if v is not None]


TAIL_HEADERS = (
    "level",
    "engine · model · workload",
    "requests",
    "evicted / stalled",
    "TTFT p50 ms",
    "TTFT p99 ms",
    "TPOT p50 ms",
    "TPOT p99 ms",
)


def tail_table(bill: Bill) -> TableData | None:
    """The mixed workload side by side, level by level: how many requests had their prompt evicted or their
    decode stalled behind another's prefill (bench's eviction signals), and the TTFT / TPOT tails. None unless
    two or more engines/configurations ran the mixed workload."""
    engines = tuple(e for e in bill.engines if e.workload == MIXED_WORK)
    if len(engines) < 2:
        return None
    levels = sorted({lv.concurrency for e in engines for lv in e.closed_loop if lv.concurrency is not None})
    rows = tuple(
        (
            f"c={c}",
            e.label,
            fmt(lv.completed),
            fmt(lv.evictions),
            fmt(lv.stats.ttft_ms.p50, 0),
            fmt(lv.stats.ttft_ms.p99, 0),
            fmt(lv.stats.tpot_ms.p50, 1),
            fmt(lv.stats.tpot_ms.p99, 1),
        )
        for c in levels
        for e in engines
        for lv in e.closed_loop
        if lv.concurrency == c
    )
    return TableData("mixed-tail", "Mixed load side by side: evictions and the tail", TAIL_HEADERS, rows)

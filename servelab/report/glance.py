"""The bill at a glance: the field report's table (one row per engine/configuration, each figure beside its
ceiling) and, for several engines, the faster one per scenario.

Pure: reads the `Bill` and the verdicts of `verdict.py`; the page places the result at the top.
"""

from __future__ import annotations

from servelab.report.bound import power_bounds
from servelab.report.data import Bill, EngineSummary
from servelab.report.tables import TableData, fmt, fmt_bytes, share
from servelab.report.verdict import Verdict, engine_verdict

GLANCE_HEADERS = ("engine · model · workload", "single-user decode tok/s (of ceiling)",
                  "best aggregate tok/s @ concurrency (of ceiling)", "usable context / request (of planned)",
                  "memory used / planned", "verdict")  # fmt: skip


def _of(value: float | None, ceiling: float | None) -> str:
    return "" if value is None or not ceiling else f" ({share(value / ceiling)})"


def single_cell(bill: Bill, engine: EngineSummary) -> str:
    speed = engine.single_stream_tok_s
    return fmt(speed) + _of(speed, bill.ceiling_short_tok_s)


def aggregate_cell(bill: Bill, engine: EngineSummary) -> str:
    best = engine.best_aggregate
    if best is None:
        return "—"
    ceiling = bill.batch_ceilings_tok_s.get(best.concurrency or 0)
    return f"{fmt(best.aggregate_tok_s)} @ c={best.concurrency}" + _of(best.aggregate_tok_s, ceiling)


def context_cell(bill: Bill, engine: EngineSummary) -> str:
    return fmt(engine.usable_context) + _of(engine.usable_context, bill.planned_context)


def memory_cell(bill: Bill, engine: EngineSummary) -> str:
    used, planned = engine.memory_used_bytes, bill.planned_total_bytes
    return f"{fmt_bytes(used)} / {fmt_bytes(planned)}" + _of(used, planned)


def glance_table(bill: Bill) -> TableData:
    """Per engine/configuration: value and share of the plan's ceiling, and the one-sentence verdict."""
    bounds = {b.label: b for b in power_bounds(bill)[1]}
    rows = tuple((e.label + (" (partial run)" if e.partial else ""), single_cell(bill, e), aggregate_cell(bill, e),
                  context_cell(bill, e), memory_cell(bill, e), engine_verdict(bill, e, bounds.get(e.label)))
                 for e in bill.engines)  # fmt: skip
    return TableData("summary", "At a glance, per engine / configuration", GLANCE_HEADERS, rows)


def _versus(best: float, others: list[float], unit: str, higher_is_better: bool = True) -> str:
    if not others:
        return f"{best:,.1f} {unit}"
    runner = max(others) if higher_is_better else min(others)
    ratio = best / runner if higher_is_better else runner / best
    return f"{best:,.1f} vs {runner:,.1f} {unit}, {ratio:.2f}×" if runner else f"{best:,.1f} {unit}"


def _faster_single(bill: Bill) -> Verdict | None:
    speeds = {e.label: e.single_stream_tok_s for e in bill.engines if e.single_stream_tok_s}
    if len(speeds) < 2:
        return None
    best = max(speeds, key=lambda k: speeds[k])
    others = [v for k, v in speeds.items() if k != best and v]
    return Verdict("single user", best, f"{best} ({_versus(speeds[best] or 0.0, others, 'tok/s')})")


def _faster_aggregate(bill: Bill) -> Verdict | None:
    tops = {e.label: e.best_aggregate for e in bill.engines if e.best_aggregate is not None}
    if len(tops) < 2:
        return None
    best = max(tops, key=lambda k: tops[k].aggregate_tok_s)
    others = [lv.aggregate_tok_s for k, lv in tops.items() if k != best and lv]
    level = tops[best]
    return Verdict("aggregate", best, f"{best} ({_versus(level.aggregate_tok_s if level else 0.0, others, 'tok/s')} "
                   f"at their best concurrency)")  # fmt: skip


def _faster_tail(bill: Bill) -> Verdict | None:
    """Lowest TTFT p99 at the highest concurrency every engine measured: the tail a loaded server shows."""
    common = set.intersection(*({lv.concurrency for lv in e.closed_loop} for e in bill.engines))
    common.discard(None)
    if len(bill.engines) < 2 or not common:
        return None
    top = max(c for c in common if c is not None)
    tails = {e.label: next(lv.stats.ttft_ms.p99 for lv in e.closed_loop if lv.concurrency == top)
             for e in bill.engines}  # fmt: skip
    known = {k: v for k, v in tails.items() if v is not None}
    if len(known) < 2:
        return None
    best = min(known, key=lambda k: known[k])
    others = [v for k, v in known.items() if k != best]
    if min(others) <= known[best] * 1.005:
        return Verdict("mixed-load tail", None, f"a tie (TTFT p99 at c={top}: {known[best]:,.1f} ms each)")
    return Verdict("mixed-load tail", best, f"{best} (TTFT p99 at c={top}: "
                   f"{_versus(known[best], others, 'ms', higher_is_better=False)} lower)")  # fmt: skip


def faster_per_scenario(bill: Bill) -> list[Verdict]:
    """With two or more engines/configurations: the faster one for one user, for aggregate throughput and
    for the tail under load."""
    if len(bill.engines) < 2:
        return []
    return [v for v in (_faster_single(bill), _faster_aggregate(bill), _faster_tail(bill)) if v is not None]

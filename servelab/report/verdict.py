"""The closing verdict: which engine/configuration for which scenario, and how far each figure is from its ceiling.

Every sentence is built from the Bill's figures; a scenario without the data to judge it says what is missing.
"""

from __future__ import annotations

from dataclasses import dataclass

from servelab.bench.monitor import HOST_TOOK_CPU
from servelab.diagnose.bound import bound_verdict
from servelab.report.bound import EngineBound, power_bounds
from servelab.report.data import Bill, EngineSummary
from servelab.report.levels import LevelFigures
from servelab.report.plan_figures import PlanFigures
from servelab.report.tables import fmt_bytes
from servelab.report.tables import share as fmt_share


@dataclass(frozen=True)
class ScenarioVerdict:
    scenario: str  # "single user", "serving many", "memory-starved", "speculative decoding", "bound", …
    choice: str | None  # the engine/configuration label chosen, or None
    sentence: str


def _pct(value: float, ceiling: float) -> str:
    return f"{value / ceiling * 100:.0f}%"


def single_user(bill: Bill) -> ScenarioVerdict:
    candidates = [e for e in bill.engines if e.single_stream_tok_s is not None]
    if not candidates:
        measured = any(e.single_stream is not None for e in bill.engines)
        why = (
            "no request at concurrency 1 produced more than one token"
            if measured
            else "no run measured concurrency 1"
        )
        return ScenarioVerdict("single user", None, f"Single-user decode speed is unknown: {why}.")
    best = max(candidates, key=lambda e: e.single_stream_tok_s or 0.0)
    speed = best.single_stream_tok_s or 0.0
    sentence = f"{best.label} decodes one stream fastest: {speed:.1f} tok/s (median)"
    others = [e for e in candidates if e is not best]
    if others:
        runner = max(others, key=lambda e: e.single_stream_tok_s or 0.0)
        sentence += f", {speed / (runner.single_stream_tok_s or 1):.2f}× {runner.label}"
    ceiling = best.planned.ceiling_short_tok_s
    if ceiling:
        sentence += (
            f"; that is {_pct(speed, ceiling)} of the {ceiling:.1f} tok/s bandwidth ceiling of the plan"
        )
    return ScenarioVerdict("single user", best.label, sentence + ".")


def serving_many(bill: Bill) -> ScenarioVerdict:
    candidates = [(e, e.best_aggregate) for e in bill.engines if e.best_aggregate is not None]
    if not candidates:
        return ScenarioVerdict(
            "serving many", None, "No closed-loop ladder was measured, so aggregate throughput is unknown."
        )
    best, level = max(candidates, key=lambda pair: pair[1].aggregate_tok_s)
    sentence = (
        f"{best.label} serves the most: {level.aggregate_tok_s:.1f} tok/s aggregate at concurrency "
        f"{level.concurrency}, TTFT p99 {level.stats.ttft_ms.p99 or 0:.0f} ms"
    )
    ceiling = best.planned.batch_ceilings_tok_s.get(int(level.concurrency or 0))
    if ceiling:
        sentence += f", {_pct(level.aggregate_tok_s, ceiling)} of the plan's {ceiling:.1f} tok/s ceiling at that concurrency"
    single = best.single_stream
    if single is not None and single.aggregate_tok_s > 0 and level is not single:
        sentence += (
            f", {level.aggregate_tok_s / single.aggregate_tok_s:.1f}× its own concurrency-1 throughput"
        )
    if best.evictions:
        sentence += f"; {best.evictions} request(s) had their prompt evicted and recomputed"
    return ScenarioVerdict("serving many", best.label, sentence + ".")


def memory_starved(bill: Bill) -> ScenarioVerdict:
    known = [e for e in bill.engines if e.memory_used_bytes is not None]
    if known:
        best = min(known, key=lambda e: e.memory_used_bytes or 0)
        sentence = f"{best.label} needs the least memory: {fmt_bytes(best.memory_used_bytes)} used"
        if best.planned.planned_total_bytes:
            sentence += f" (plan: {fmt_bytes(best.planned.planned_total_bytes)})"
        return ScenarioVerdict("memory-starved", best.label, sentence + ".")
    if bill.plan is not None and bill.planned_total_bytes:
        capacity = bill.plan_memory.capacity if bill.plan_memory else None
        room = f" of {fmt_bytes(capacity)}" if capacity else ""
        quant = bill.plan.quant or "the planned quantization"
        return ScenarioVerdict(
            "memory-starved",
            None,
            f"No run recorded memory used; the plan puts {quant} at "
            f"{fmt_bytes(bill.planned_total_bytes)}{room}.",
        )
    return ScenarioVerdict(
        "memory-starved",
        None,
        "No memory figures: pass --plan, or --server-log with a llama-server log (-lv 4).",
    )


def speculative(bill: Bill) -> ScenarioVerdict | None:
    spec = bill.spec
    if not spec:
        return None
    verdict = str(spec.get("verdict", "unknown"))
    parts = [verdict.capitalize()]
    if isinstance(spec.get("alpha"), int | float):
        parts.append(f"acceptance alpha {spec['alpha']:.2f}")
    if isinstance(spec.get("measured_speedup"), int | float):
        parts.append(f"measured speedup {spec['measured_speedup']:.2f}×")
    if isinstance(spec.get("predicted_speedup"), int | float):
        parts.append(f"predicted {spec['predicted_speedup']:.2f}×")
    why = f" — {str(spec['why']).rstrip('.')}" if spec.get("why") else ""
    return ScenarioVerdict("speculative decoding", None, ", ".join(parts) + why + ".")


def ceiling_at(planned: PlanFigures, context_tokens: float) -> float | None:
    """A plan's decode ceiling at a context: bytes per token grow linearly from short to full context."""
    short, full, context = planned.ceiling_short_tok_s, planned.ceiling_full_tok_s, planned.planned_context
    start = planned.short_context_tokens
    if not short or not full or context is None or context <= start:
        return None
    return 1 / (1 / short + (1 / full - 1 / short) * (context_tokens - start) / (context - start))


def longest_context(bill: Bill) -> ScenarioVerdict | None:
    """The single-stream request with the longest context, against the ceiling at that context."""
    points = [
        (r.input_tokens + r.output_tokens / 2, r.decode_tok_s, e.label, e)
        for e in bill.engines
        if e.single_stream is not None
        for r in e.single_stream.requests
        if r.decode_tok_s is not None
    ]
    if not points:
        return None
    context, speed, label, engine = max(points, key=lambda p: (p[0], p[1]))
    ceiling = ceiling_at(engine.planned, context)
    if ceiling is None or speed is None:
        return None
    return ScenarioVerdict(
        "against the ceiling",
        label,
        f"At {context:,.0f} tokens of context {label} decoded {speed:.1f} tok/s, "
        f"{_pct(speed, ceiling)} of the {ceiling:.1f} tok/s ceiling at that context.",
    )


def long_context(bill: Bill, engine: EngineSummary) -> str | None:
    """The usable context an engine really got, against its plan's context."""
    planned = engine.planned.planned_context
    if engine.usable_context is None or planned is None:
        return None
    if engine.usable_context < planned:
        return (
            f"{engine.label} got {engine.usable_context} tokens of context per request, "
            f"{_pct(engine.usable_context, planned)} of the {planned} planned."
        )
    return f"{engine.label} got the full planned context ({engine.usable_context} tokens)."


def verdicts(bill: Bill) -> list[ScenarioVerdict]:
    """The closing verdicts, in reading order."""
    found = [single_user(bill), serving_many(bill), memory_starved(bill)]
    ceiling = longest_context(bill)
    if ceiling is not None:
        found.append(ceiling)
    spec = speculative(bill)
    if spec is not None:
        found.append(spec)
    for engine in bill.engines:
        sentence = long_context(bill, engine)
        if sentence:
            found.append(ScenarioVerdict("usable context", engine.label, sentence))
    return found + bound_verdicts(bill)


def bound_verdicts(bill: Bill) -> list[ScenarioVerdict]:
    """Per engine with both power and bandwidth figures (or one decisive): what limited it, in numbers."""
    decided = [b for b in power_bounds(bill)[1] if b.analysis.verdict != "undetermined"]
    return [
        ScenarioVerdict(
            "bound", b.label, f"{b.label} was {b.analysis.verdict}: {b.analysis.why.split(': ', 1)[0]}."
        )
        for b in decided
    ]


SATURATED = 0.9  # a level at or above this share of the best aggregate has reached the plateau
QUEUEING_TTFT_GROWTH = 2.0  # TTFT p50 at least this many times the plateau's: requests wait in a queue


def _struck(bill: Bill, engine: EngineSummary, host: bool) -> list[str]:
    """This engine's invalid levels whose reason is the host's (it took the CPU away) or, `host` False, the
    client's own (its loop or CPU set the pace)."""
    return [
        level
        for (run, target, level), why in bill.invalid_levels.items()
        if run == engine.run_id
        and target == engine.target_index
        and "client" in why
        and (HOST_TOOK_CPU in why) is host
    ]


def _client_bound(bill: Bill, engine: EngineSummary) -> str | None:
    levels = _struck(bill, engine, host=False)
    if not levels:
        return None
    return f"client-bound at {', '.join(levels)} (the load generator, not the server, set the pace there)"


def host_verdict(bill: Bill, engine: EngineSummary) -> str | None:
    """The host, apart from the server: levels where it took the CPU away from the load generator."""
    levels = _struck(bill, engine, host=True)
    if not levels:
        return None
    return (
        f"The host took the CPU away from the load generator at {', '.join(levels)}: those levels' latencies "
        "carry the host's delays, not only the server's; rerun them when the host is quieter, with more "
        "requests per level."
    )


def _evicting(engine: EngineSummary) -> str | None:
    hit = [lv.label for lv in engine.levels if lv.evictions]
    if not hit:
        return None
    return f"evicting: {engine.evictions} request(s) had their prompt recomputed (at {', '.join(hit)})"


def _bandwidth(bill: Bill, engine: EngineSummary, bound: EngineBound | None) -> str | None:
    """The bound at one user: the power analysis where it has a bandwidth figure, else the measured decode
    against the plan's memory-bound decode ceiling (the same fraction: tok/s × bytes per token / bandwidth)."""
    speed, ceiling = engine.single_stream_tok_s, engine.planned.ceiling_short_tok_s
    fraction = bound.analysis.bandwidth_fraction if bound else None
    if fraction is None and speed is not None and ceiling:
        fraction = speed / ceiling
    if fraction is None:
        return None
    power = bound.analysis.power_fraction if bound else None
    verdict = bound_verdict(fraction, power)
    share = f"{fmt_share(fraction)} of the decode ceiling at one user"
    if verdict in ("bandwidth-bound", "compute/power-bound"):
        return f"{verdict} ({share})"
    if verdict == "neither":
        return f"neither bandwidth- nor power-bound ({share}): overheads limit decode"
    return f"below the bandwidth ceiling ({share})"


def _plateau(engine: EngineSummary) -> LevelFigures | None:
    ladder = [lv for lv in engine.closed_loop if lv.aggregate_tok_s > 0]
    best = max((lv.aggregate_tok_s for lv in ladder), default=0.0)
    return next((lv for lv in ladder if lv.aggregate_tok_s >= SATURATED * best), None)


def _queueing(engine: EngineSummary) -> str | None:
    """Past the level where aggregate stops growing, more concurrency only lengthens the wait for a first token."""
    plateau = _plateau(engine)
    base = None if plateau is None else plateau.stats.ttft_ms.p50
    if plateau is None or not base:
        return None
    beyond = [lv for lv in engine.closed_loop if (lv.concurrency or 0) > (plateau.concurrency or 0)]
    worst = max(beyond, key=lambda lv: lv.stats.ttft_ms.p50 or 0.0, default=None)
    if worst is None or (worst.stats.ttft_ms.p50 or 0.0) < QUEUEING_TTFT_GROWTH * base:
        return None
    growth = worst.aggregate_tok_s / plateau.aggregate_tok_s - 1
    return (
        f"queueing beyond {plateau.label}: at {worst.label} TTFT p50 is "
        f"{(worst.stats.ttft_ms.p50 or 0.0) / base:.1f}× while aggregate changes {growth:+.0%}"
    )


def _scaling(engine: EngineSummary) -> str | None:
    single, best = engine.single_stream, engine.best_aggregate
    if single is None or best is None or best is single or single.aggregate_tok_s <= 0:
        return None
    return f"aggregate scales {best.aggregate_tok_s / single.aggregate_tok_s:.1f}× from c=1 to {best.label}"


def engine_verdict(bill: Bill, engine: EngineSummary, bound: EngineBound | None = None) -> str:
    """One sentence on what limited this engine/configuration: client-bound, evicting, bandwidth-bound,
    queueing (in that order), or how it scaled."""
    found = [
        f
        for f in (
            _client_bound(bill, engine),
            _evicting(engine),
            _bandwidth(bill, engine, bound),
            _queueing(engine),
        )
        if f
    ]
    if not any(f.startswith("queueing") for f in found):
        found += [f for f in (_scaling(engine),) if f]
    host = host_verdict(bill, engine)
    if not found:
        return "Too few levels to judge: bench a ladder that includes concurrency 1." + (
            f" {host}" if host else ""
        )
    text = "; ".join(found)
    return text[0].upper() + text[1:] + "." + (f" {host}" if host else "")

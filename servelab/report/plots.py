"""The bill's plots, each a function of the `Bill` returning a `Plot` (an inline SVG) or a note why not.

Every axis is labelled with its unit. Series are one per engine/configuration, in the Bill's order.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from servelab.report.data import Bill, EngineSummary
from servelab.report.levels import NS_PER_S, LevelFigures
from servelab.report.svg import INK, figure_svg, new_figure, plain, styled
from servelab.report.verdict import ceiling_at

GIB = 1024**3


@dataclass(frozen=True)
class Plot:
    key: str  # stable id, e.g. "aggregate-throughput"
    title: str
    svg: ET.Element | None
    note: str | None = None  # why it is missing or what it lacks


def _ladder(engine: EngineSummary, value: Callable[[LevelFigures], float | None]) -> tuple[list, list]:
    points = [(lv.concurrency, value(lv)) for lv in engine.closed_loop]
    points = [(c, v) for c, v in points if v is not None]
    return [c for c, _ in points], [v for _, v in points]


def _percentile(attr: str, q: int) -> Callable[[LevelFigures], float | None]:
    """The level's ``attr`` distribution (``ttft_ms``, ``itl_ms``) at percentile ``q``."""
    return lambda lv: getattr(lv.stats, attr).percentile(q)


def _ladder_axes(ax, ylabel: str) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xlabel("concurrency (requests in flight)")
    ax.set_ylabel(ylabel)
    ax.grid(True)
    ax.xaxis.set_major_formatter("{x:g}")


def _no_ladder(bill: Bill) -> bool:
    return not any(e.closed_loop for e in bill.engines)


def ladder_plot(
    bill: Bill,
    key: str,
    title: str,
    ylabel: str,
    value: Callable[[LevelFigures], float | None],
    ceilings: dict[int, float] | None = None,
) -> Plot:
    """One line per engine over the closed-loop levels; `ceilings` (concurrency → value) drawn dashed."""
    if _no_ladder(bill):
        return Plot(key, title, None, "no closed-loop levels in these runs")
    if not any(_ladder(engine, value)[0] for engine in bill.engines):
        return Plot(key, title, None, "no level has this figure (no request produced more than one token)")
    with styled():
        figure = new_figure()
        ax = figure.add_subplot()
        peak = 0.0
        for engine in bill.engines:
            xs, ys = _ladder(engine, value)
            ax.plot(xs, ys, marker="o", label=plain(engine.label))
            peak = max([peak, *ys])
        if ceilings:
            xs = sorted(ceilings)
            ax.plot(xs, [ceilings[x] for x in xs], "--", color=INK, label="ceiling (plan, memory bandwidth)")
            peak = max(peak, *ceilings.values())
        _ladder_axes(ax, ylabel)
        ax.set_ylim(0, peak * 1.3 or 1)  # headroom for the legend
        ax.legend()
        return Plot(key, title, figure_svg(figure, key, title))


def aggregate_throughput(bill: Bill) -> Plot:
    return ladder_plot(bill, "aggregate-throughput", "Aggregate output throughput vs concurrency",
                       "aggregate output (tokens/s)", lambda lv: lv.aggregate_tok_s,
                       ceilings=bill.batch_ceilings_tok_s)  # fmt: skip


def per_stream(bill: Bill) -> Plot:
    return ladder_plot(bill, "per-stream", "Per-stream decode speed vs concurrency",
                       "per-stream decode, median (tokens/s)", lambda lv: lv.stats.per_stream_tok_s.median)  # fmt: skip


def latency_percentiles(bill: Bill) -> Plot:
    key, title = "latency-percentiles", "TTFT and ITL percentiles vs concurrency"
    if _no_ladder(bill):
        return Plot(key, title, None, "no closed-loop levels in these runs")
    with styled():
        figure = new_figure(6.4, 5.6)
        for row, (name, attr) in enumerate((("TTFT", "ttft_ms"), ("ITL", "itl_ms"))):
            ax = figure.add_subplot(2, 1, row + 1)
            for i, engine in enumerate(bill.engines):
                colour = f"C{i % 8}"
                for q, style in ((50, "-"), (99, "--")):
                    xs, ys = _ladder(engine, _percentile(attr, q))
                    ax.plot(xs, ys, style, marker="o", color=colour, label=plain(f"{engine.label} p{q}"))
            _ladder_axes(ax, f"{name} (ms)")
            ax.set_ylim(bottom=0)
            ax.set_title(f"{name} p50 (solid) and p99 (dashed)")
            if row == 0:
                ax.legend(fontsize=7)
        return Plot(key, title, figure_svg(figure, key, title))


def _ceiling_curve(bill: Bill, max_context: float) -> tuple[np.ndarray, np.ndarray] | None:
    """tok/s ceiling vs context (see `verdict.ceiling_at`)."""
    context = bill.planned_context
    if ceiling_at(bill, 0) is None or context is None:
        return None
    xs = np.linspace(0, max(context, max_context), 200)
    return xs, np.array([ceiling_at(bill, x) for x in xs])


def roofline(bill: Bill) -> Plot:
    key, title = "roofline", "Decode speed vs context against the bandwidth ceiling"
    points = [(e, r.input_tokens + r.output_tokens / 2, r.decode_tok_s)
              for e in bill.engines for lv in e.levels if lv.concurrency == 1
              for r in lv.requests if r.decode_tok_s is not None]  # fmt: skip
    if not points:
        return Plot(
            key, title, None, "no single-stream (concurrency 1) requests to place against the ceiling"
        )
    with styled():
        figure = new_figure()
        ax = figure.add_subplot()
        for i, engine in enumerate(bill.engines):
            mine = [(x, y) for e, x, y in points if e is engine]
            if mine:
                xs, ys = zip(*mine, strict=True)
                ax.scatter(
                    xs,
                    ys,
                    s=14,
                    color=f"C{i % 8}",
                    label=plain(f"{engine.label} (measured)"),
                )
        curve = _ceiling_curve(bill, max(x for _, x, _ in points))
        if curve is not None:
            ax.plot(*curve, color=INK, linestyle="--", label="ceiling (plan: weights + KV bytes / bandwidth)")
        ax.set_xlabel("context (tokens: prompt + half the output)")
        ax.set_ylabel("single-stream decode (tokens/s)")
        top = _y_top([y for _, _, y in points], None if curve is None else float(curve[1].max()))
        ax.set_ylim(0, top)
        ax.grid(True)
        ax.legend(fontsize=7)
        notes = [] if curve is not None else ["no ceiling: pass --plan with decode_ceiling_tok_s and context"]
        above = sum(1 for _, _, y in points if y > top)
        if above:
            notes.append(
                f"{above} measured point(s) above {top:,.0f} tok/s are off the chart (several chunks read at once)"
            )
        return Plot(key, title, figure_svg(figure, key, title), "; ".join(notes) or None)


def _y_top(values: list[float], ceiling: float | None) -> float:
    """Room for the ceiling and the bulk of the points, not for a few outliers (chunks read at once)."""
    bulk = float(np.percentile(values, 90)) if len(values) >= 10 else max(values)
    if ceiling is not None:
        bulk = min(max(bulk, ceiling), max(values))
    return max(bulk, ceiling or 0.0) * 1.3


def memory_breakdown(bill: Bill) -> Plot:
    key, title = "memory", "Memory: planned breakdown and measured use"
    memory = bill.plan_memory
    if memory is None:
        return Plot(key, title, None, "no plan: pass --plan FILE (the output of `servelab plan --json`)")
    planned = {"weights": memory.weights, "kv_cache": memory.kv_cache, "recurrent_state": memory.recurrent_state,
               "activations": memory.activations, "runtime": memory.runtime}  # fmt: skip
    parts = {part: float(part_bytes or 0) for part, part_bytes in planned.items()}
    total = float(memory.total or sum(parts.values()))
    unit, scale = ("GiB", GIB) if total >= GIB else ("MiB", 1024**2)
    with styled():
        figure = new_figure(6.4, 3.0)
        ax = figure.add_subplot()
        left = 0.0
        for i, (part, part_bytes) in enumerate(parts.items()):
            size = part_bytes / scale
            ax.barh(["plan"], [size], left=left, color=f"C{i}", label=f"{part} {size:.2f} {unit}")
            left += size
        for engine in bill.engines:
            if engine.memory_used_bytes is not None:
                ax.barh([plain(engine.label)], [engine.memory_used_bytes / scale], color="#64748b")
        if memory.capacity and memory.capacity < 4 * total:
            ax.axvline(memory.capacity / scale, color=INK, linestyle="--", label="capacity")
        ax.set_xlabel(f"memory ({unit})")
        figure.legend(fontsize=7, loc="outside lower center", ncols=3)
        return Plot(key, title, figure_svg(figure, key, title))


def itl_distribution(bill: Bill) -> Plot:
    key, title = "itl-distribution", "Inter-token latency distribution (all levels)"
    samples = [(e, [x * 1e3 for lv in e.levels for r in lv.requests for x in r.itls_s]) for e in bill.engines]
    samples = [(e, xs) for e, xs in samples if xs]
    if not samples:
        return Plot(key, title, None, "no inter-token gaps recorded")
    with styled():
        figure = new_figure()
        ax = figure.add_subplot()
        everything = np.concatenate([xs for _, xs in samples])
        positive = everything[everything > 0]
        low = positive.min() if len(positive) else 1e-3
        bins = np.geomspace(low, max(everything.max(), low * 10) * 1.01, 40)
        for engine, xs in samples:
            zeros = sum(1 for x in xs if x <= 0)
            extra = f" ({zeros} gaps of 0 ms not shown)" if zeros else ""
            ax.hist(
                [x for x in xs if x > 0],
                bins=bins.tolist(),
                histtype="step",
                linewidth=1.5,
                label=plain(engine.label + extra),
            )
        ax.set_xscale("log")
        ax.set_xlabel("inter-token latency (ms)")
        ax.set_ylabel("tokens (count)")
        ax.grid(True)
        ax.legend(fontsize=7)
        return Plot(key, title, figure_svg(figure, key, title))


def _in_flight(spans: list[tuple[int, int, bool, bool]], origin: int) -> tuple[list[float], list[int]]:
    events = sorted([(s, 1) for s, _, _, _ in spans] + [(e, -1) for _, e, _, _ in spans])
    xs, ys, count = [], [], 0
    for t, delta in events:
        count += delta
        xs.append((t - origin) / NS_PER_S)
        ys.append(count)
    return xs, ys


def timeline(bill: Bill) -> Plot:
    key, title = "timeline", "Requests in flight over time, slot evictions marked"
    shown = [e for e in bill.engines if any(lv.timeline for lv in e.levels)][:4]
    if not shown:
        return Plot(key, title, None, "no measured requests")
    with styled():
        figure = new_figure(6.4, 1.2 + 1.6 * len(shown))
        for row, engine in enumerate(shown):
            ax = figure.add_subplot(len(shown), 1, row + 1)
            spans = [span for lv in engine.levels for span in lv.timeline]
            origin = min(s for s, _, _, _ in spans)
            ax.step(*_in_flight(spans, origin), where="post", color=f"C{bill.engines.index(engine) % 8}")
            evicted = [(s - origin) / NS_PER_S for s, _, _, ev in spans if ev]
            failed = [(e - origin) / NS_PER_S for _, e, ok, _ in spans if not ok]
            ax.plot(
                evicted,
                [0] * len(evicted),
                "x",
                color="#e11d48",
                markersize=8,
                label=f"evicted ({len(evicted)})",
            )
            ax.plot(failed, [0] * len(failed), "v", color="#eab308", label=f"failed ({len(failed)})")
            ax.set_title(plain(engine.label), fontsize=8)
            ax.set_ylabel("in flight (requests)")
            ax.legend(fontsize=7, loc="upper right")
            ax.grid(True)
        ax.set_xlabel("time since the first measured request (s)")
        return Plot(key, title, figure_svg(figure, key, title))


PLOTS = (
    aggregate_throughput,
    per_stream,
    latency_percentiles,
    roofline,
    memory_breakdown,
    itl_distribution,
    timeline,
)


def all_plots(bill: Bill) -> list[Plot]:
    return [make(bill) for make in PLOTS]

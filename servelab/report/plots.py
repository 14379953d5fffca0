"""The bill's plots, each a function of the `Bill` returning a `Plot` (an inline SVG) or a note why not.

Every axis is labelled with its unit. Series are one per engine/configuration, in the Bill's order. Legends
sit outside the data area (below it); every point carries a native tooltip with its exact values (`Marks`);
an axis spans the measured curve, and a ceiling far above it (more than `FAR` times the data) is drawn as
an annotated band at the top edge instead of squashing the data to the bottom.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from servelab.plan.saved import SavedPlan
from servelab.report.data import Bill, EngineSummary
from servelab.report.levels import NS_PER_S, LevelFigures
from servelab.report.overlay import series_colours
from servelab.report.plan_figures import PlanFigures
from servelab.report.svg import INK, Marks, figure_svg, new_figure, plain, styled
from servelab.report.verdict import ceiling_at

GIB = 1024**3
FAR = 3.0  # a ceiling more than this many times the measured peak is marked at the edge, not drawn to scale


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


def _ladder_axes(ax, ylabel: str, marks: Marks) -> None:
    ax.set_xscale("log", base=2)
    marks.tag(ax.set_xlabel("concurrency (requests in flight)"), "axis-label")
    marks.tag(ax.set_ylabel(ylabel), "axis-label")
    ax.grid(True)
    ax.xaxis.set_major_formatter("{x:g}")


def legend_below(figure, marks: Marks, ncols: int = 2, **kwargs) -> None:
    """The figure's legend outside every axes, under them (constrained layout makes room)."""
    handles, labels = [], []
    for ax in figure.axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            if label not in labels:
                handles.append(handle)
                labels.append(label)
    if handles:
        marks.tag(
            figure.legend(handles, labels, loc="outside lower center", ncols=ncols, fontsize=7, **kwargs),
            "legend",
        )


def _no_ladder(bill: Bill) -> bool:
    return not any(e.closed_loop for e in bill.engines)


def off_scale_band(ax, marks: Marks, top: float, text: str, tips: list[str]) -> None:
    """A ceiling above the axis: a shaded band along the top edge, the figure written under it."""
    marks.tag(ax.axhspan(top * 0.97, top, color=INK, alpha=0.12, linewidth=0), "series", ["\n".join(tips)])
    ax.text(0.99, 0.955, text, transform=ax.transAxes, ha="right", va="top", fontsize=7)


Ceilings = list[tuple[str, dict[int, float]]]  # (whose plan, concurrency -> tok/s), one per plan entry


def _ceiling_text(ceilings: dict[int, float], peak: float) -> str:
    low, high = min(ceilings.values()), max(ceilings.values())
    span = f"{low:,.0f}" if round(low) == round(high) else f"{low:,.0f}–{high:,.0f}"
    return f"↑ ceiling (plan) {span} tok/s: {low / peak:,.0f}× the measured peak, off this scale"


def ladder_plot(
    bill: Bill,
    key: str,
    title: str,
    ylabel: str,
    value: Callable[[LevelFigures], float | None],
    ceilings: Ceilings | None = None,
    band: str | None = None,
) -> Plot:
    """One line per engine over the closed-loop levels, a prediction's `band` (its figure's key in
    predict/bands.py LEVEL_FIGURES) shaded around its dashed line; each plan's `ceilings` (concurrency → value)
    drawn dashed, or as a band at the top edge when far above the data."""
    if _no_ladder(bill):
        return Plot(key, title, None, "no closed-loop levels in these runs")
    if not any(_ladder(engine, value)[0] for engine in bill.engines):
        return Plot(key, title, None, "no level has this figure (no request produced more than one token)")
    marks = Marks()
    unit = ylabel[ylabel.rfind("(") + 1 : -1] if ylabel.endswith(")") else ""
    colours = series_colours(bill)
    with styled():
        figure = new_figure()
        ax = figure.add_subplot()
        peak = 0.0
        for engine in bill.engines:
            xs, ys = _ladder(engine, value)
            (line,) = ax.plot(
                xs,
                ys,
                "--" if engine.predicted else "-",
                marker="o",
                color=colours[engine.label],
                label=plain(engine.label),
            )
            marks.points(
                line, [f"{engine.label}\nc={x:g}: {y:,.3f} {unit}" for x, y in zip(xs, ys, strict=True)]
            )
            peak = max([peak, *ys])
            if engine.predicted and band is not None:
                peak = max(peak, _band_area(ax, marks, engine, band, colours[engine.label], unit))
        peak = peak or 1.0
        top = peak * 1.25
        named = [(whose, c) for whose, c in ceilings or [] if c]
        near = [(whose, c) for whose, c in named if max(c.values()) <= FAR * peak]
        for i, (whose, c) in enumerate(near):
            xs = sorted(c)
            plan = "plan" if len(named) == 1 else f"{whose} plan"
            (line,) = ax.plot(
                xs,
                [c[x] for x in xs],
                "--" if i == 0 else ":",
                marker=".",
                color=INK,
                label=f"ceiling ({plan}, memory bandwidth)",
            )
            marks.points(line, [f"ceiling ({plan}) at c={x:g}: {c[x]:,.3f} {unit}" for x in xs])
            top = max(top, max(c.values()) * 1.1)
        far = [(whose, c) for whose, c in named if (whose, c) not in near]
        if far:
            both = {x: v for _, c in far for x, v in c.items()}
            off_scale_band(
                ax,
                marks,
                top,
                _ceiling_text(both, peak),
                [
                    f"ceiling ({whose} plan) at c={x:g}: {c[x]:,.3f} {unit}"
                    for whose, c in far
                    for x in sorted(c)
                ],
            )
        _ladder_axes(ax, ylabel, marks)
        ax.set_ylim(0, top)
        legend_below(figure, marks)
        return Plot(key, title, figure_svg(figure, key, title, marks))


def _band_area(ax, marks: Marks, engine: EngineSummary, key: str, colour: str, unit: str) -> float:
    """A prediction's band of figure `key` shaded over its closed-loop levels (a tooltip per level); the
    band's top, 0 without one."""
    points = [(lv.concurrency, b) for lv in engine.closed_loop if (b := lv.band(key)) is not None]
    if not points:
        return 0.0
    xs = [c for c, _ in points]
    area = ax.fill_between(
        xs,
        [b[0] for _, b in points],
        [b[1] for _, b in points],
        color=colour,
        alpha=0.15,
        linewidth=0,
        label=plain(f"{engine.label} band"),
    )
    tips = "\n".join(f"c={c:g}: {b[0]:,.3f}–{b[1]:,.3f} {unit}" for c, b in points)
    marks.tag(area, "band", [f"{engine.label} band (10th-90th percentile of measured / predicted)\n{tips}"])
    return max(b[1] for _, b in points)


def aggregate_throughput(bill: Bill) -> Plot:
    return ladder_plot(
        bill,
        "aggregate-throughput",
        "Aggregate output throughput vs concurrency",
        "aggregate output (tokens/s)",
        lambda lv: lv.aggregate_tok_s,
        ceilings=[(_whose(p), PlanFigures(p).batch_ceilings_tok_s) for p in bill.plans],
        band="output_tok_s",
    )


def _whose(plan: SavedPlan) -> str:
    return plan.engine or "the"


def per_stream(bill: Bill) -> Plot:
    return ladder_plot(
        bill,
        "per-stream",
        "Per-stream decode speed vs concurrency",
        "per-stream decode, median (tokens/s)",
        lambda lv: lv.stats.per_stream_tok_s.median,
        band="per_stream_tok_s_p50",
    )


def latency_percentiles(bill: Bill) -> Plot:
    key, title = "latency-percentiles", "TTFT and ITL percentiles vs concurrency"
    if _no_ladder(bill):
        return Plot(key, title, None, "no closed-loop levels in these runs")
    marks = Marks()
    colours = series_colours(bill)
    overlaid = any(e.predicted for e in bill.engines)  # predictions dashed: measured p99 dash-dotted then
    styles = {False: ((50, "-"), (99, "-." if overlaid else "--")), True: ((50, "--"), (99, ":"))}
    with styled():
        figure = new_figure(6.4, 5.6)
        for row, (name, attr) in enumerate((("TTFT", "ttft_ms"), ("ITL", "itl_ms"))):
            ax = figure.add_subplot(2, 1, row + 1)
            for engine in bill.engines:
                colour = colours[engine.label]
                for q, style in styles[engine.predicted]:
                    xs, ys = _ladder(engine, _percentile(attr, q))
                    (line,) = ax.plot(
                        xs,
                        ys,
                        style,
                        marker="o",
                        color=colour,
                        label=plain(engine.label) if q == 50 else "_p99",
                    )
                    marks.points(
                        line,
                        [
                            f"{engine.label}\nc={x:g}: {name} p{q} {y:,.3f} ms"
                            for x, y in zip(xs, ys, strict=True)
                        ],
                    )
            _ladder_axes(ax, f"{name} (ms)", marks)
            ax.set_ylim(bottom=0)
            ax.set_title(
                f"{name} p50 (solid) and p99 (dash-dotted); predicted p50 dashed, p99 dotted"
                if overlaid
                else f"{name} p50 (solid) and p99 (dashed)"
            )
        legend_below(figure, marks)
        return Plot(key, title, figure_svg(figure, key, title, marks))


def _ceiling_curve(planned: PlanFigures, max_context: float) -> tuple[np.ndarray, np.ndarray] | None:
    """A plan's tok/s ceiling vs context (see `verdict.ceiling_at`)."""
    context = planned.planned_context
    if ceiling_at(planned, 0) is None or context is None:
        return None
    xs = np.linspace(0, max(context, max_context), 200)
    return xs, np.array([ceiling_at(planned, x) for x in xs])


def roofline(bill: Bill) -> Plot:
    key, title = "roofline", "Decode speed vs context against the bandwidth ceiling"
    points = [
        (e, r.input_tokens + r.output_tokens / 2, r.decode_tok_s)
        for e in bill.engines
        for lv in e.levels
        if lv.concurrency == 1
        for r in lv.requests
        if r.decode_tok_s is not None
    ]
    if not points:
        return Plot(
            key, title, None, "no single-stream (concurrency 1) requests to place against the ceiling"
        )
    marks = Marks()
    with styled():
        figure = new_figure()
        ax = figure.add_subplot()
        for i, engine in enumerate(bill.engines):
            mine = [(x, y) for e, x, y in points if e is engine]
            if mine:
                xs, ys = zip(*mine, strict=True)
                dots = ax.scatter(xs, ys, s=14, color=f"C{i % 8}", label=plain(engine.label))
                marks.points(
                    dots, [f"{engine.label}\ncontext {x:,.0f} tokens: {y:,.3f} tok/s" for x, y in mine]
                )
        widest = max(x for _, x, _ in points)
        curves = [
            (_whose(p), c) for p in bill.plans if (c := _ceiling_curve(PlanFigures(p), widest)) is not None
        ]
        measured = _y_top([y for _, _, y in points], None)
        ceiling_top = max((float(c[1].max()) for _, c in curves), default=None)
        far = ceiling_top is not None and ceiling_top > FAR * measured
        top = measured if far else _y_top([y for _, _, y in points], ceiling_top)
        for i, (whose, curve) in enumerate(curves if not far else []):
            plan = "plan" if len(curves) == 1 else f"{whose} plan"
            (line,) = ax.plot(
                *curve,
                color=INK,
                linestyle="--" if i == 0 else ":",
                label=f"ceiling ({plan}: weights + KV bytes / bandwidth)",
            )
            marks.tag(
                line,
                "series",
                [
                    f"ceiling ({plan}): {curve[1][0]:,.3f} tok/s at context {curve[0][0]:,.0f} "
                    f"to {curve[1][-1]:,.3f} at {curve[0][-1]:,.0f}"
                ],
            )
        if curves and far:
            low = min(float(c[1].min()) for _, c in curves)
            text = f"↑ ceiling (plan) {low:,.0f}–{ceiling_top:,.0f} tok/s: {low / (top / 1.3):,.0f}× the measured, off this scale"
            off_scale_band(
                ax,
                marks,
                top,
                text,
                [
                    f"ceiling ({whose} plan) {float(c[1].min()):,.3f}–{float(c[1].max()):,.3f} tok/s"
                    for whose, c in curves
                ],
            )
        marks.tag(ax.set_xlabel("context (tokens: prompt + half the output)"), "axis-label")
        marks.tag(ax.set_ylabel("single-stream decode (tokens/s)"), "axis-label")
        ax.set_ylim(0, top)
        ax.grid(True)
        legend_below(figure, marks)
        notes = [] if curves else ["no ceiling: pass --plan with decode_ceiling_tok_s and context"]
        above = sum(1 for _, _, y in points if y > top)
        if above:
            notes.append(
                f"{above} measured point(s) above {top:,.0f} tok/s are off the chart (several chunks read at once)"
            )
        return Plot(key, title, figure_svg(figure, key, title, marks), "; ".join(notes) or None)


def _y_top(values: list[float], ceiling: float | None) -> float:
    """Room for the ceiling and the bulk of the points, not for a few outliers (chunks read at once)."""
    bulk = float(np.percentile(values, 90)) if len(values) >= 10 else max(values)
    if ceiling is not None:
        bulk = min(max(bulk, ceiling), max(values))
    return max(bulk, ceiling or 0.0) * 1.3


PARTS = ("weights", "kv_cache", "recurrent_state", "activations", "runtime")


def memory_breakdown(bill: Bill) -> Plot:
    key, title = "memory", "Memory: planned breakdown and measured use"
    plans = [(p, p.memory_bytes) for p in bill.plans if p.memory_bytes is not None]
    if not plans:
        return Plot(key, title, None, "no plan: pass --plan FILE (the output of `servelab plan --json`)")
    totals = [float(m.total or sum(getattr(m, part) or 0 for part in PARTS)) for _, m in plans]
    unit, scale = ("GiB", GIB) if max(totals) >= GIB else ("MiB", 1024**2)
    marks = Marks()
    with styled():
        figure = new_figure(6.4, 2.6 + 0.4 * len(plans))
        ax = figure.add_subplot()
        for row, (plan, memory) in enumerate(plans):
            name = "plan" if len(plans) == 1 else f"plan ({_whose(plan)})"
            left = 0.0
            for i, part in enumerate(PARTS):
                part_bytes = float(getattr(memory, part) or 0)
                size = part_bytes / scale
                label = (
                    f"{part} {size:.2f} {unit}" if len(plans) == 1 else (part if row == 0 else "_nolegend_")
                )
                (bar,) = ax.barh([name], [size], left=left, color=f"C{i}", label=label)
                marks.tag(bar, "point", [f"{name}: {part} {size:,.3f} {unit} ({part_bytes:,.0f} bytes)"])
                left += size
        for engine in bill.engines:
            if engine.memory_used_bytes is not None:
                used = engine.memory_used_bytes
                (bar,) = ax.barh([plain(engine.label)], [used / scale], color="#64748b")
                marks.tag(bar, "point", [f"{engine.label}: used {used / scale:,.3f} {unit} ({used:,} bytes)"])
        capacity = plans[0][1].capacity
        if capacity and capacity < 4 * max(totals):
            ax.axvline(capacity / scale, color=INK, linestyle="--", label="capacity")
        marks.tag(ax.set_xlabel(f"memory ({unit})"), "axis-label")
        legend_below(figure, marks, ncols=3)
        return Plot(key, title, figure_svg(figure, key, title, marks))


def itl_distribution(bill: Bill) -> Plot:
    key, title = "itl-distribution", "Inter-token latency distribution (all levels)"
    samples = [(e, [x * 1e3 for lv in e.levels for r in lv.requests for x in r.itls_s]) for e in bill.engines]
    samples = [(e, xs) for e, xs in samples if xs]
    if not samples:
        return Plot(key, title, None, "no inter-token gaps recorded")
    marks = Marks()
    with styled():
        figure = new_figure()
        ax = figure.add_subplot()
        everything = np.concatenate([xs for _, xs in samples])
        positive = everything[everything > 0]
        low = positive.min() if len(positive) else 1e-3
        bins = np.geomspace(low, max(everything.max(), low * 10) * 1.01, 40)
        for engine, xs in samples:
            zeros = sum(1 for x in xs if x <= 0)
            extra = f", {zeros} gaps of 0 ms not shown" if zeros else ""
            *_, patches = ax.hist(
                [x for x in xs if x > 0],
                bins=bins.tolist(),
                histtype="step",
                linewidth=1.5,
                label=plain(engine.label),
            )
            p50, p99 = np.percentile(xs, [50, 99])
            for patch in patches if isinstance(patches, list) else [patches]:
                marks.tag(
                    patch,
                    "series",
                    [f"{engine.label}: {len(xs):,} gaps, p50 {p50:,.3f} ms, p99 {p99:,.3f} ms{extra}"],
                )
        ax.set_xscale("log")
        marks.tag(ax.set_xlabel("inter-token latency (ms)"), "axis-label")
        marks.tag(ax.set_ylabel("tokens (count)"), "axis-label")
        ax.grid(True)
        legend_below(figure, marks, ncols=1)
        return Plot(key, title, figure_svg(figure, key, title, marks))


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
    marks = Marks()
    with styled():
        figure = new_figure(6.4, 1.4 + 1.6 * len(shown))
        for row, engine in enumerate(shown):
            ax = figure.add_subplot(len(shown), 1, row + 1)
            spans = [span for lv in engine.levels for span in lv.timeline]
            origin = min(s for s, _, _, _ in spans)
            xs, ys = _in_flight(spans, origin)
            (line,) = ax.step(xs, ys, where="post", color=f"C{bill.engines.index(engine) % 8}")
            marks.tag(
                line,
                "series",
                [
                    f"{engine.label}: {len(spans):,} requests, at most {max(ys)} in flight "
                    f"over {xs[-1]:,.3f} s"
                ],
            )
            evicted = [(s - origin) / NS_PER_S for s, _, _, ev in spans if ev]
            failed = [(e - origin) / NS_PER_S for _, e, ok, _ in spans if not ok]
            (dots,) = ax.plot(
                evicted, [0] * len(evicted), "x", color="#e11d48", markersize=8, label="evicted"
            )
            marks.points(dots, [f"{engine.label}: evicted request sent at {t:,.3f} s" for t in evicted])
            (dots,) = ax.plot(failed, [0] * len(failed), "v", color="#eab308", label="failed")
            marks.points(dots, [f"{engine.label}: request failed at {t:,.3f} s" for t in failed])
            ax.set_title(plain(f"{engine.label}: {len(evicted)} evicted, {len(failed)} failed"), fontsize=8)
            marks.tag(ax.set_ylabel("in flight (requests)"), "axis-label")
            ax.grid(True)
        marks.tag(ax.set_xlabel("time since the first measured request (s)"), "axis-label")
        legend_below(figure, marks)
        return Plot(key, title, figure_svg(figure, key, title, marks))


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

"""The ladder as operating points (the Pareto view): per engine, output tok/s per GPU against tok/s per user,
one point per level, with the `--slo` line where the SLO bounds the speed a user sees.

A user's speed is the level's median per-stream decode tok/s; output per GPU is the level's aggregate
(steady-window) output tok/s over the GPUs an engine spans (the plan's tensor parallel; one without a
plan). A TPOT limit of T ms means at least 1000 / T tok/s per user: a vertical line; points left of it miss
the SLO. Other limits (TTFT, end-to-end) have no place on these axes: each point's tooltip gives the share
of its requests that met the whole SLO (`LevelStats.slo_attainment`).
"""

from __future__ import annotations

from servelab.report.data import Bill
from servelab.report.plots import Plot, legend_below
from servelab.report.svg import INK, Marks, figure_svg, new_figure, plain, styled

KEY, TITLE = "pareto", "Operating points: output tok/s per GPU vs tok/s per user"


def slo_speed(slo: dict[str, float]) -> tuple[float, str] | None:
    """The per-user speed the SLO demands (tok/s) and how it was read, or None when no limit bounds it."""
    tpot = slo.get("tpot_ms")
    if tpot:
        return 1000.0 / tpot, f"SLO TPOT ≤ {tpot:g} ms → ≥ {1000.0 / tpot:,.1f} tok/s per user"
    return None


def _tip(label: str, level: str, user: float, per_gpu: float, attainment: float | None) -> str:
    met = "" if attainment is None else f"\nSLO met by {attainment:.0%} of requests"
    return f"{label}\n{level}: {user:,.3f} tok/s per user, {per_gpu:,.3f} output tok/s per GPU{met}"


def pareto(bill: Bill) -> Plot:
    points = {
        e.label: [
            (lv.label, lv.stats.per_stream_tok_s.median, lv.aggregate_tok_s, lv.stats.slo_attainment)
            for lv in e.levels
            if lv.stats.per_stream_tok_s.median and lv.aggregate_tok_s > 0
        ]
        for e in bill.engines
    }
    if not any(points.values()):
        return Plot(KEY, TITLE, None, "no level has both a per-user decode speed and an aggregate throughput")
    gpus_of = {e.label: e.planned.gpus_per_engine or 1 for e in bill.engines}
    planned = any(e.planned.gpus_per_engine for e in bill.engines)
    marks = Marks()
    with styled():
        figure = new_figure()
        ax = figure.add_subplot()
        for label, mine in points.items():
            if not mine:
                continue
            xs = [user or 0.0 for _, user, _, _ in mine]
            ys = [agg / gpus_of[label] for _, _, agg, _ in mine]
            (line,) = ax.plot(xs, ys, marker="o", label=plain(label))
            marks.points(
                line, [_tip(label, lv, x, y, a) for (lv, _, _, a), x, y in zip(mine, xs, ys, strict=True)]
            )
            for (level, *_), x, y in zip(mine, xs, ys, strict=True):
                ax.annotate(level, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=6)
        limit = slo_speed(bill.slo)
        if limit is not None:
            marks.tag(ax.axvline(limit[0], color=INK, linestyle="--", label=limit[1]), "series", [limit[1]])
        marks.tag(ax.set_xlabel("per user: decode tok/s per stream (median)"), "axis-label")
        tps = sorted(set(gpus_of.values()))
        per = f"TP {'/'.join(map(str, tps))}, the plan's" if planned else "1 assumed: no plan"
        marks.tag(ax.set_ylabel(f"output tok/s per GPU ({per})"), "axis-label")
        ax.set_xlim(left=0)
        ax.set_ylim(bottom=0)
        ax.grid(True)
        legend_below(figure, marks)
        note = None
        if bill.slo and limit is None:
            note = (
                f"the SLO ({', '.join(f'{k}={v:g}' for k, v in bill.slo.items())}) sets no per-user speed, so it "
                "has no line here; each point's tooltip gives the share of requests that met it"
            )
        elif not bill.slo:
            note = "no SLO line: bench with --slo tpot_ms=N to draw the per-user speed it demands"
        return Plot(KEY, TITLE, figure_svg(figure, KEY, TITLE, marks), note)

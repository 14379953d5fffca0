"""The bill as an ordered list of sections of plain blocks (paragraphs, lists, tables, plots).

Built once from a `Bill`; the HTML, Markdown and terminal renderers only lay these blocks out, so the three
say the same things. Every sentence comes from the data; a section whose input is absent holds a note.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from servelab.report import advice, glance, overlay, pareto, plots, tables
from servelab.report.advice import AdviceDoc
from servelab.report.bound import bound_sentence, bound_table, level_power_table, power_bounds
from servelab.report.data import Bill
from servelab.report.plan_figures import PlanFigures
from servelab.report.plots import Plot
from servelab.report.tables import TableData
from servelab.report.verdict import verdicts


@dataclass(frozen=True)
class Para:
    text: str
    kind: str = "text"  # "text", "note" (an input is missing) or "warning"


def code_spans(text: str) -> tuple[tuple[bool, str], ...]:
    """``text`` cut at its backtick pairs: (is code, piece) in order, the backticks dropped. Sentences name
    commands in backticks (`servelab plan --save FILE`); HTML and Markdown show those as code. An unpaired
    backtick stays in the text."""
    parts = str(text).split("`")
    if len(parts) % 2 == 0:  # an odd number of backticks: the last one has no partner
        parts[-2:] = [parts[-2] + "`" + parts[-1]]
    return tuple((i % 2 == 1, part) for i, part in enumerate(parts) if part)


@dataclass(frozen=True)
class Items:
    items: tuple[str, ...]


Block = Para | Items | TableData | Plot


@dataclass(frozen=True)
class Section:
    key: str  # the HTML id
    title: str
    blocks: tuple[Block, ...]


def _runs_section(bill: Bill) -> Section:
    blocks: list[Block] = [
        Para(f"Runs: {', '.join(bill.run_ids)}." if bill.run_ids else "No stored runs given.")
    ]
    if bill.run_infos:
        blocks.append(tables.runs_table(bill))
    blocks += [Para(w[0].upper() + w[1:], "warning") for w in bill.warnings]
    return Section("runs", "Runs", tuple(blocks))


def _ceiling_paras(bill: Bill) -> tuple[Para, ...]:
    """One sentence per plan entry the engines are held against (each engine its own engine's entry)."""
    if bill.plan is None:
        return (
            Para(
                "No plan given, so no ceilings: pass --plan FILE (the output of `servelab plan --json`).",
                "note",
            ),
        )
    paras = []
    for plan in bill.plans:
        where = " on ".join(v for v in (plan.model or bill.plan_model, plan.gpu or bill.plan_gpu) if v)
        figures = PlanFigures(plan)
        short, full = figures.ceiling_short_tok_s, figures.ceiling_full_tok_s
        context = "?" if plan.context is None else plan.context
        held = [e.label for e in bill.engines if e.plan is plan]
        whose = f" (held against: {', '.join(held)})" if len(bill.plans) > 1 and held else ""
        paras.append(
            Para(
                f"Plan{' for ' + where if where else ''}: {plan.engine or '?'}, {plan.quant or '?'}, "
                f"context {context}; decode ceiling {tables.fmt(short)} tok/s short, "
                f"{tables.fmt(full)} tok/s at full context{whose}."
            )
        )
    return tuple(paras)


def _plot_section(key: str, title: str, made: list[Plot] | None) -> Section:
    if made is None:
        return Section(
            key,
            title,
            (Para("Plots of this section are in the HTML report (servelab report -o bill.html).", "note"),),
        )
    blocks: list[Block] = []
    for plot in made:
        if plot.svg is not None:
            blocks.append(plot)
        if plot.note:
            blocks.append(Para(f"{plot.title}: {plot.note}.", "note"))
    return Section(key, title, tuple(blocks))


def _failures(bill: Bill) -> tuple[Block, ...]:
    table = tables.failures_table(bill)
    return (Para("No request failed."),) if table is None else (table,)


NUMBER = re.compile(r"\d+(?:\.\d+)?")


def _invalid(bill: Bill) -> tuple[Block, ...]:
    """One box per kind of reason (the same sentence but for its figures), listing the levels it struck; each
    figure that differs between them shown as its range."""
    labels = {(e.run_id, e.target_index): e.label for e in bill.engines}
    kinds: dict[str, list[tuple[str, str]]] = {}
    for (run, target, level), why in bill.invalid_levels.items():
        text = why or "the bench marked it invalid"
        kinds.setdefault(NUMBER.sub("\0", text), []).append(
            (f"{level} of {labels.get((run, target), run)}", text)
        )
    blocks: list[Block] = []
    for template, struck in kinds.items():
        values = [[float(x) for x in NUMBER.findall(text)] for _, text in struck]
        pieces = template.split("\0")
        spans = [_span([v[i] for v in values]) for i in range(len(pieces) - 1)]
        reason = "".join(p + s for p, s in zip(pieces, [*spans, ""], strict=True))
        many = len(struck) > 1
        blocks.append(
            Para(
                f"{'These levels are' if many else 'Level ' + struck[0][0] + ' is'} not trustworthy: "
                f"{reason}.",
                "warning",
            )
        )
        if many:
            blocks.append(Items(tuple(name for name, _ in struck)))
    return tuple(blocks)


def _span(values: list[float]) -> str:
    low, high = min(values), max(values)
    return f"{low:g}" if low == high else f"{low:g}–{high:g}"


TAIL_REQUESTS = 100  # fewer measured requests than this and a level's p99 is (near) its largest value


def _thin_tails(bill: Bill) -> tuple[Block, ...]:
    """One note when some levels have too few requests for their p99 to be more than their largest value."""
    thin = sorted({lv.completed for e in bill.engines for lv in e.levels if 0 < lv.completed < TAIL_REQUESTS})
    if not thin:
        return ()
    counts = ", ".join(map(str, thin))
    return (
        Para(
            f"Some levels completed only {counts} requests: their p99 is (close to) their largest value, "
            f"noise rather than a tail; bench at least {TAIL_REQUESTS} requests per level (--requests) to "
            "read p99.",
            "note",
        ),
    )


def _prediction_section(bill: Bill) -> tuple[Section, ...]:
    """With a prediction in the bill: its error per figure per level against each measured target it is held
    to (the ladder plots draw it dashed); none without a prediction."""
    if not any(e.predicted for e in bill.engines):
        return ()
    found = tables.prediction_tables(bill)
    if not found:
        why = (
            "No measured target has the predicted model and workload: pass the measured run and "
            "`--predicted RUN` to hold them to each other."
        )
        return (Section("prediction", "Predicted vs measured", (Para(why, "note"),)),)
    every = [e for pair in overlay.pairs(bill) for e in overlay.errors(pair)]
    median = overlay.median_abs_error(every)
    inside, banded = overlay.inside_count(every)
    within = (
        f" {inside} of {banded} measured figures fell inside the prediction's band (the 10th-90th percentile"
        " of measured / predicted in its regime's cross-validation: 8 in 10 expected)."
        if banded
        else ""
    )
    summary = Para(
        "Error = (predicted − measured) / measured; median |error| over every figure and level: "
        f"{'—' if median is None else f'{median:.1%}'}." + within
    )
    sources = {line for pair in overlay.pairs(bill) if (line := overlay.provenance_line(pair.predicted))}
    notes = tuple(Para(line + ".", "note") for line in sorted(sources))
    return (Section("prediction", "Predicted vs measured", (summary, *notes, *found)),)


def _doctor_section(bill: Bill) -> Section:
    if bill.doctor is None:
        return Section(
            "doctor",
            "Doctor findings",
            (
                Para(
                    "No doctor findings: pass --doctor FILE (the output of `servelab doctor --json`).", "note"
                ),
            ),
        )
    table = tables.doctor_table(bill.doctor)
    if not table.rows:
        return Section("doctor", "Doctor findings", (Para("Doctor found nothing to report."),))
    counts = {s: sum(1 for r in table.rows if r[0] == s) for s in ("critical", "warning", "info")}
    summary = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
    return Section("doctor", "Doctor findings", (Para(f"Doctor found {summary}."), table))


def _spec_section(bill: Bill) -> Section:
    if bill.spec is None:
        return Section(
            "spec",
            "Speculative decoding",
            (
                Para(
                    "No speculative-decoding verdict: pass --spec FILE (the output of `servelab spec --json`).",
                    "note",
                ),
            ),
        )
    return Section("spec", "Speculative decoding", (tables.spec_table(bill.spec),))


def _power_section(bill: Bill) -> Section:
    """The bound verdict per engine with its numbers; each missing input is a note naming its flag."""
    inputs, bounds = power_bounds(bill)
    shown = [b for b in bounds if b.has_numbers]
    blocks: list[Block] = [bound_table(shown)] if shown else []
    blocks += [Para(bound_sentence(b)) for b in shown if b.analysis.verdict != "undetermined"]
    blocks += [t for t in (level_power_table(bounds),) if t is not None]
    notes = dict.fromkeys((*inputs.notes, *(n for b in bounds for n in b.notes)))
    blocks += [Para(n, "note") for n in notes]
    return Section("power", "Power and the bound", tuple(blocks) or (Para("No runs to analyse.", "note"),))


def _glance_section(bill: Bill) -> Section:
    """The field report's table first; with several engines, the faster one per scenario under it."""
    faster = glance.faster_per_scenario(bill)
    items = (Items(tuple(f"Faster for {v.scenario}: {v.sentence}." for v in faster)),) if faster else ()
    tail = glance.tail_table(bill)
    return Section(
        "summary",
        "At a glance",
        (glance.glance_table(bill), *items, *((tail,) if tail else ()), *_ceiling_paras(bill)),
    )


def advice_section(doc: AdviceDoc | None, *, with_plots: bool = True) -> tuple[Section, ...]:
    """`servelab advise --json` (`--advice FILE`): the ask, the front and its plot, advice vs measurement."""
    if doc is None:
        return ()
    blocks: list[Block] = [Para(f"Asked: {doc.ask}. {doc.tally}."), advice.front_table(doc)]
    if with_plots:
        plot = advice.front_plot(doc)
        blocks += [plot] if plot.svg is not None else [Para(f"{plot.title}: {plot.note}.", "note")]
    checks = advice.checks_table(doc)
    blocks += [] if checks is None else [checks]
    c = doc.confirmation
    if c is not None:
        kind = "text" if c.ran and c.meets_slo else "warning"
        blocks.append(Para(f"Confirmation of {c.candidate}: {c.verdict}.", kind))
        blocks += [advice.confirmation_table(c)] if c.figures else []
        blocks += [Items(tuple(f"`{cmd}`" for cmd in c.commands))] if c.commands else []
    return (Section("advice", "Advice", tuple(blocks)),)


def build_page(
    bill: Bill, *, with_plots: bool = True, advised: AdviceDoc | None = None
) -> tuple[Section, ...]:
    """All sections of the bill in reading order. Without plots the plot sections keep only their notes."""
    made = {p.key: p for p in (*plots.all_plots(bill), pareto.pareto(bill))} if with_plots else {}

    def pick(*keys: str) -> list[Plot] | None:
        return [made[k] for k in keys if k in made] if with_plots else None

    return (
        _glance_section(bill),
        *advice_section(advised, with_plots=with_plots),
        _runs_section(bill),
        Section(
            "ladder",
            "Concurrency ladder",
            (
                *_invalid(bill),
                *tables.ladder_tables(bill),
                *tables.server_tables(bill),
                *_thin_tails(bill),
                *_failures(bill),
            ),
        ),
        *_prediction_section(bill),
        _plot_section("throughput", "Throughput", pick("aggregate-throughput", "per-stream", "pareto")),
        _plot_section("latency", "Latency", pick("latency-percentiles", "itl-distribution")),
        _plot_section("roofline", "Against the ceiling", pick("roofline")),
        _plot_section("memory", "Memory", pick("memory")),
        _plot_section("timeline", "Timeline and slot evictions", pick("timeline")),
        _doctor_section(bill),
        _power_section(bill),
        _spec_section(bill),
        Section(
            "verdict",
            "Verdict",
            (Items(tuple(f"{v.scenario.capitalize()}: {v.sentence}" for v in verdicts(bill))),),
        ),
    )

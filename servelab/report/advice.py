"""The bill's advice section: `servelab advise --json` (its front, ranking and, with `--confirm`, advice vs
measurement) as tables and the front as a plot.

The document is read at the JSON edge into typed values (`AdviceDoc.from_json`): a wrong kind of value is one
ConfigError line; text from the file reaches the page only through the renderers, which escape it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from servelab.errors import ConfigError
from servelab.report.plots import Plot, legend_below
from servelab.report.svg import Marks, figure_svg, new_figure, plain, styled
from servelab.report.tables import TableData, fmt

KEY, TITLE = "advice-front", "Advice: goodput per GPU vs p99 TPOT, the Pareto front"


def _num(data: Mapping[str, Any], key: str, where: str) -> float | None:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{where}: {key} is {type(value).__name__}, not a number")
    return float(value)


def _text(data: Mapping[str, Any], key: str, where: str) -> str:
    value = data.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ConfigError(f"{where}: {key} is {type(value).__name__}, not text")
    return value


def _list(data: Mapping[str, Any], key: str, where: str) -> list[Any]:
    value = data.get(key) or []
    if not isinstance(value, list):
        raise ConfigError(f"{where}: {key} is {type(value).__name__}, not a list")
    return value


def _object(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where} is {type(value).__name__}, not an object")
    return value


@dataclass(frozen=True, kw_only=True)
class Member:
    """One configuration that meets the demand (the front, or the rest of the ranking)."""

    candidate: str
    per_gpu_tok_s: float | None
    ttft_p99_ms: float | None
    tpot_p99_ms: float | None
    cost: float | None
    replicas: int | None
    load: float | None
    command: str
    on_front: bool
    bands: dict[str, tuple[float, float]]
    within_band_of: str = ""  # the better-ranked front member it is in a statistical tie with
    safe_at_load: bool | None = None  # its SLOs met at the bands' upper edge at its load (None: not said)
    misses_at_band_edge: tuple[str, ...] = ()
    safe_load: float | None = None  # per replica, the highest load safe at the bands' upper edge
    safe_replicas: int | None = None

    @classmethod
    def from_json(cls, value: Any, where: str, on_front: bool) -> Member:
        d = _object(value, where)
        bands: dict[str, tuple[float, float]] = {}
        for k, v in _object(d.get("bands") or {}, f"{where}.bands").items():
            if not (isinstance(v, list) and len(v) == 2 and all(isinstance(x, int | float) for x in v)):
                raise ConfigError(f"{where}.bands.{k}: give [low, high]")
            bands[str(k)] = (float(v[0]), float(v[1]))
        replicas = _num(d, "replicas", where)
        safe = d.get("safe_at_load")
        safe_replicas = _num(d, "safe_replicas", where)
        return cls(
            candidate=_text(d, "candidate", where),
            per_gpu_tok_s=_num(d, "output_tok_s_per_gpu", where),
            ttft_p99_ms=_num(d, "ttft_p99_ms", where),
            tpot_p99_ms=_num(d, "tpot_p99_ms", where),
            cost=_num(d, "usd_per_million_output_tokens", where),
            replicas=None if replicas is None else int(replicas),
            load=_num(d, "load_per_replica", where),
            command=_text(d, "command", where),
            on_front=on_front or bool(d.get("on_front")),
            bands=bands,
            within_band_of=_text(d, "within_band_of", where),
            safe_at_load=safe if isinstance(safe, bool) else None,
            misses_at_band_edge=tuple(str(x) for x in _list(d, "misses_at_band_edge", where)),
            safe_load=_num(d, "safe_capacity_per_replica", where),
            safe_replicas=None if safe_replicas is None else int(safe_replicas),
        )


@dataclass(frozen=True)
class ConfirmedFigure:
    """One figure at the advised load: as advised, re-predicted with the fitted figures, and measured; written by
    `advise --confirm` (advise/confirm.py) into the advice JSON and read back here."""

    figure: str
    advised: float | None
    repredicted: float | None
    measured: float | None

    @staticmethod
    def error(predicted: float | None, measured: float | None) -> float | None:
        """(predicted - measured) / measured, as the bill's overlay writes it."""
        if predicted is None or measured is None or measured == 0:
            return None
        return (predicted - measured) / measured

    def to_json(self) -> dict[str, Any]:
        return {
            "figure": self.figure,
            "advised": round_or_none(self.advised),
            "repredicted": round_or_none(self.repredicted),
            "measured": round_or_none(self.measured),
            "advised_error": round_or_none(self.error(self.advised, self.measured), 4),
            "repredicted_error": round_or_none(self.error(self.repredicted, self.measured), 4),
        }

    @classmethod
    def from_json(cls, value: Any, where: str) -> ConfirmedFigure:
        d = _object(value, where)
        return cls(
            _text(d, "figure", where),
            _num(d, "advised", where),
            _num(d, "repredicted", where),
            _num(d, "measured", where),
        )


def round_or_none(x: float | None, digits: int = 2) -> float | None:
    """`x` rounded for the JSON (None where it is not a finite number)."""
    return None if x is None or not math.isfinite(x) else round(x, digits)


@dataclass(frozen=True)
class Confirmed:
    candidate: str
    ran: bool
    verdict: str
    commands: tuple[str, ...]
    figures: tuple[ConfirmedFigure, ...]
    meets_slo: bool | None

    @classmethod
    def from_json(cls, value: Any, where: str) -> Confirmed:
        d = _object(value, where)
        figures = tuple(
            ConfirmedFigure.from_json(f, w)
            for i, f in enumerate(_list(d, "figures", where))
            for w in (f"{where}.figures[{i}]",)
            if _object(f, w)  # an empty object is no figure
        )
        commands = tuple(str(c) for c in _list(d, "commands", where))
        meets = d.get("meets_slo")
        return cls(
            _text(d, "candidate", where),
            bool(d.get("ran")),
            _text(d, "verdict", where),
            commands,
            figures,
            meets if isinstance(meets, bool) else None,
        )


@dataclass(frozen=True)
class Check:
    """One figure of a measured level beside its prediction with the calibration made from the same runs (the
    demo's `predicted_vs_measured`)."""

    engine: str
    workload: str
    level: str
    figure: str
    predicted: float | None
    measured: float | None

    @classmethod
    def from_json(cls, value: Any, where: str) -> Check:
        d = _object(value, where)
        return cls(
            _text(d, "engine", where),
            _text(d, "workload", where),
            _text(d, "level", where),
            _text(d, "figure", where),
            _num(d, "predicted", where),
            _num(d, "measured", where),
        )


@dataclass(frozen=True)
class AdviceDoc:
    """`servelab advise --json`, as the bill reads it."""

    ask: str
    tally: str
    front: tuple[Member, ...]
    others: tuple[Member, ...]  # meeting the demand, off the front
    confirmation: Confirmed | None
    checks: tuple[Check, ...] = ()

    @classmethod
    def from_json(cls, value: Any, where: str = "--advice") -> AdviceDoc:
        d = _object(value, where)
        if "front" not in d or "ranked" not in d:
            raise ConfigError(f"{where}: not the output of `servelab advise --json` (no front or ranking)")
        front = tuple(
            Member.from_json(m, f"{where}.front[{i}]", True) for i, m in enumerate(_list(d, "front", where))
        )
        ranked = [
            Member.from_json(m, f"{where}.ranked[{i}]", False)
            for i, m in enumerate(_list(d, "ranked", where))
        ]
        names = {m.candidate for m in front}
        slo = _object(d.get("slo") or {}, f"{where}.slo")
        demand = _object(d.get("demand") or {}, f"{where}.demand")
        users, rate = _num(demand, "users", where), _num(demand, "rate", where)
        load = f"{users:g} users" if users else f"{rate:g} req/s" if rate else "as many users as fit"
        bounds = ", ".join(f"{k} ≤ {v:g}" for k, v in slo.items() if isinstance(v, int | float))
        ask = (
            f"{_text(d, 'model', where)} on {fmt(_num(d, 'gpus', where), 0)} x {_text(d, 'gpu', where)}: "
            f"{load}, SLO {bounds or 'none'}"
        )
        tally = (
            f"{fmt(_num(d, 'candidates', where), 0)} candidates, {len(_list(d, 'pruned', where))} do not fit, "
            f"{len(_list(d, 'missed', where))} miss the SLO, {len(ranked)} meet it; front of {len(front)}"
        )
        confirmed = d.get("confirmation")
        checks = tuple(
            Check.from_json(c, f"{where}.predicted_vs_measured[{i}]")
            for i, c in enumerate(_list(d, "predicted_vs_measured", where))
        )
        return cls(
            ask,
            tally,
            front,
            tuple(m for m in ranked if m.candidate not in names),
            None if confirmed is None else Confirmed.from_json(confirmed, f"{where}.confirmation"),
            checks,
        )


def _band(m: Member, key: str, value: float | None, digits: int) -> str:
    band = m.bands.get(key)
    return (
        fmt(value, digits)
        if band is None
        else f"{fmt(value, digits)} ({fmt(band[0], digits)}–{fmt(band[1], digits)})"
    )


def _safety(m: Member) -> str:
    """The SLOs at the bands' upper edge: met at the advised load, or which break and the safe load."""
    if m.safe_at_load is None or not m.bands:
        return "—"
    head = "met" if m.safe_at_load else "missed: " + "; ".join(m.misses_at_band_edge)
    if m.safe_load is not None:
        return f"{head}; safe to {fmt(m.safe_load, 3 if m.safe_load % 1 else 0)} per replica"
    return head


def front_table(doc: AdviceDoc) -> TableData:
    place = {m.candidate: i for i, m in enumerate(doc.front, 1)}
    rows = tuple(
        (
            str(i),
            m.candidate,
            _band(m, "output_tok_s_per_gpu", m.per_gpu_tok_s, 1),
            f"{fmt(m.replicas, 0) if m.replicas is not None else '—'} x {fmt(m.load, 3 if m.load and m.load % 1 else 0)}",
            _band(m, "ttft_p99_ms", m.ttft_p99_ms, 0),
            _band(m, "tpot_p99_ms", m.tpot_p99_ms, 1),
            _band(m, "usd_per_million_output_tokens", m.cost, 3),
            _safety(m),
            f"within the band of {place.get(m.within_band_of, m.within_band_of)}" if m.within_band_of else "",
            m.command,
        )
        for i, m in enumerate(doc.front, 1)
    )
    headers = (
        "rank",
        "configuration",
        "goodput tok/s per GPU",
        "replicas x load",
        "TTFT p99 ms",
        "TPOT p99 ms",
        "USD / M output tokens",
        "SLO at the bands' upper edge",
        "statistical tie",
        "launch command",
    )
    return TableData(
        "advice-front",
        "The Pareto front (error band in brackets where one ships; ranked by what each can be counted on for)",
        headers,
        rows,
    )


def confirmation_table(c: Confirmed) -> TableData:
    rows = tuple(
        (
            f.figure,
            fmt(f.advised),
            fmt(f.repredicted),
            fmt(f.measured),
            _error(f.advised, f.measured),
            _error(f.repredicted, f.measured),
        )
        for f in c.figures
    )
    headers = (
        "figure",
        "advised",
        "re-predicted (calibrated)",
        "measured",
        "advised error",
        "re-predicted error",
    )
    return TableData("advice-confirm", f"Advice vs measurement: {c.candidate}", headers, rows)


def _error(p: float | None, m: float | None) -> str:
    return "—" if p is None or m is None or m == 0 else f"{(p - m) / m:+.1%}"


def checks_table(doc: AdviceDoc) -> TableData | None:
    """Each measured level beside its prediction with the calibration the runs made, a column pair per figure."""
    if not doc.checks:
        return None
    figures = list(dict.fromkeys(c.figure for c in doc.checks))
    rows: dict[tuple[str, str, str], dict[str, Check]] = {}
    for c in doc.checks:
        rows.setdefault((c.engine, c.workload, c.level), {})[c.figure] = c
    body = tuple(
        (*key, *(cell for f in figures for cell in _check_cells(got.get(f)))) for key, got in rows.items()
    )
    headers = (
        "engine",
        "workload",
        "level",
        *(h for f in figures for h in (f"{f} measured", "predicted", "error")),
    )
    return TableData(
        "advice-checks",
        "Predicted with the calibration vs measured (the launched configurations)",
        headers,
        body,
    )


def _check_cells(c: Check | None) -> tuple[str, str, str]:
    if c is None:
        return ("—", "—", "—")
    return (fmt(c.measured), fmt(c.predicted), _error(c.predicted, c.measured))


def front_plot(doc: AdviceDoc) -> Plot:
    """Goodput per GPU against p99 TPOT: the front marked, the rest of those meeting the demand faint."""
    members = [
        m for m in (*doc.front, *doc.others) if m.per_gpu_tok_s is not None and m.tpot_p99_ms is not None
    ]
    if not members:
        return Plot(KEY, TITLE, None, "no configuration meets the demand, so there is no front to draw")
    marks = Marks()
    with styled():
        figure = new_figure()
        ax = figure.add_subplot()
        for group, style, label in (
            (doc.others, {"alpha": 0.35, "marker": "o", "linestyle": "none"}, "dominated"),
            (doc.front, {"marker": "D", "linestyle": "-"}, "the front"),
        ):
            shown = [m for m in group if m in members]
            if not shown:
                continue
            shown.sort(key=lambda m: m.tpot_p99_ms or 0.0)
            xs = [m.tpot_p99_ms or 0.0 for m in shown]
            ys = [m.per_gpu_tok_s or 0.0 for m in shown]
            (line,) = ax.plot(xs, ys, label=label, **style)
            marks.points(
                line,
                [
                    f"{plain(m.candidate)}\n{y:,.1f} tok/s per GPU, p99 TPOT {x:,.1f} ms"
                    for m, x, y in zip(shown, xs, ys, strict=True)
                ],
            )
        c = doc.confirmation
        measured = _measured_point(c) if c is not None else None
        if measured is not None:
            (point,) = ax.plot(
                [measured[0]],
                [measured[1]],
                marker="*",
                markersize=12,
                linestyle="none",
                label="measured (--confirm)",
            )
            marks.points(point, [f"measured: {measured[1]:,.1f} tok/s, p99 TPOT {measured[0]:,.1f} ms"])
        marks.tag(ax.set_xlabel("p99 TPOT ms (lower is better)"), "axis-label")
        marks.tag(ax.set_ylabel("goodput: output tok/s per GPU"), "axis-label")
        ax.set_xlim(left=0)
        ax.set_ylim(bottom=0)
        ax.grid(True)
        legend_below(figure, marks)
        return Plot(KEY, TITLE, figure_svg(figure, KEY, TITLE, marks))


def _measured_point(c: Confirmed) -> tuple[float, float] | None:
    got = {f.figure: f.measured for f in c.figures}
    tpot, goodput = got.get("tpot_p99_ms"), got.get("goodput_tok_s")
    return None if tpot is None or goodput is None else (tpot, goodput)

"""Predicted against measured: which prediction a measured ladder is held to, and the error of each figure.

A prediction (`servelab predict`, a run marked `meta.predicted`) pairs with a measured target of the same
model and workload, or, with `report --predicted RUN`, with every measured target. For each level both have,
the error of TTFT p50, TPOT p50 and output tok/s is (predicted − measured) / measured; the median |error| over
the levels, per figure and over all, is what docs/predict.md's validation quotes. A prediction whose figures carry
a band (predict/bands.py) is held to it too: how many measured figures fall inside. Pure: Bill in, values out.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass

from servelab.report.data import Bill, EngineSummary, model_name
from servelab.report.levels import LevelFigures


@dataclass(frozen=True)
class Pair:
    predicted: EngineSummary
    measured: EngineSummary


Figure = Callable[[LevelFigures], float | None]
FIGURES: tuple[tuple[str, Figure], ...] = (
    ("TTFT p50 ms", lambda lv: lv.stats.ttft_ms.p50),
    ("TPOT p50 ms", lambda lv: lv.stats.tpot_ms.p50),
    ("output tok/s", lambda lv: lv.aggregate_tok_s or None),
)
# each figure's key among a predicted level's bands (predict/bands.py LEVEL_FIGURES)
BAND_KEYS = {"TTFT p50 ms": "ttft_ms_p50", "TPOT p50 ms": "tpot_ms_p50", "output tok/s": "output_tok_s"}


@dataclass(frozen=True)
class FigureError:
    level: str
    figure: str
    predicted: float
    measured: float
    band: tuple[float, float] | None = None  # the prediction's band (low, high), where it has one

    @property
    def error(self) -> float:
        """(predicted − measured) / measured."""
        return (self.predicted - self.measured) / self.measured

    @property
    def inside(self) -> bool | None:
        """Whether the measured figure fell inside the predicted band (None: no band)."""
        return None if self.band is None else self.band[0] <= self.measured <= self.band[1]


def pairs(bill: Bill) -> list[Pair]:
    """Each measured target with the prediction it is held to (measured targets without one are left out)."""
    predicted = [e for e in bill.engines if e.predicted]
    found = []
    for measured in (e for e in bill.engines if not e.predicted):
        same = [
            p
            for p in predicted
            if p.workload == measured.workload and model_name(p.model) == model_name(measured.model)
        ]
        if bill.predicted_run is not None:
            same = [p for p in predicted if p.run_id == bill.predicted_run]
        if same:
            found.append(Pair(same[0], measured))
    return found


def errors(pair: Pair) -> list[FigureError]:
    """Every figure of every level both ladders have (matched by level, in the measured ladder's order)."""
    predicted = {lv.label: lv for lv in pair.predicted.levels}
    out = []
    for lv in pair.measured.levels:
        mine = predicted.get(lv.label)
        if mine is None:
            continue
        for name, value in FIGURES:
            p, m = value(mine), value(lv)
            if p is not None and m:
                out.append(FigureError(lv.label, name, p, m, mine.band(BAND_KEYS[name])))
    return out


def provenance_line(engine: EngineSummary) -> str | None:
    """Where a prediction's figures came from, as its stored levels say (`predicted`: source, detail, stale);
    None for a measurement or a prediction stored before predictions kept it."""
    kept = next((lv.predicted for lv in engine.levels if lv.predicted), None)
    if kept is None or not isinstance(kept.get("source"), str):
        return None
    detail, stale = kept.get("detail"), kept.get("stale")
    line = f"{engine.label}: figures from {kept['source']}" + (
        f" ({detail})" if isinstance(detail, str) else ""
    )
    return line + (f"; stale: {stale}" if isinstance(stale, str) else "")


def inside_count(found: list[FigureError], figure: str | None = None) -> tuple[int, int]:
    """(measured figures inside their band, figures with a band), of one figure (None: of all)."""
    banded = [e for e in found if e.inside is not None and (figure is None or e.figure == figure)]
    return sum(1 for e in banded if e.inside), len(banded)


def median_abs_error(found: list[FigureError], figure: str | None = None) -> float | None:
    """The median |error| of one figure (None: of all), or None when there is none."""
    values = [abs(e.error) for e in found if figure is None or e.figure == figure]
    return statistics.median(values) if values else None


def series_colours(bill: Bill) -> dict[str, str]:
    """A colour per series label: a prediction takes the colour of the measured target it is held to."""
    colours: dict[str, str] = {}
    for engine in bill.engines:
        if not engine.predicted:
            colours[engine.label] = f"C{len(colours) % 8}"
    for pair in pairs(bill):
        colours.setdefault(pair.predicted.label, colours[pair.measured.label])
    for engine in bill.engines:
        colours.setdefault(engine.label, f"C{len(set(colours.values())) % 8}")
    return colours

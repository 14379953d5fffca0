"""Where a predicted figure's parameters came from, and the band it is expected within (docs/predict.md
"Reading a prediction: bands and provenance").

Three sources, one per prediction: `corpus` (the GPU step model fitted to the public corpus, shipped as
`stepmodel.json`), `calibration` (this machine's own profile, predict/profiles.py) or `plan` (the plan's sourced
efficiencies alone). Only the corpus fit has been cross-validated, so only its figures carry a band: the
`StepModel.band` of the figure's regime (engine x GPU class x figure x batch range), the 10th-90th percentile of
measured / predicted over the rows cross-validation left out. A band is (lo, hi) factors: a prediction p is
expected in (p x lo, p x hi). Pure: values in, values out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from servelab.predict.roofline import AchievedRates
from servelab.predict.stepmodel import StepModel
from servelab.results.stats import LevelStats

SOURCES = ("corpus", "calibration", "plan")


@dataclass(frozen=True)
class Provenance:
    """Where the step prices came from: `source` (one of SOURCES), what exactly (`detail`: the fit's note, the
    profile's name and date), and `stale`: why a calibration profile may not describe the release predicted
    (None: not stale)."""

    source: str
    detail: str
    stale: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "detail": self.detail, "stale": self.stale}


@dataclass(frozen=True)
class Pricing:
    """The figures a prediction's steps are priced with, where they came from, and the model whose
    cross-validation bands apply (the corpus fit; None for a calibration or the plan alone)."""

    rates: AchievedRates
    provenance: Provenance
    model: StepModel | None = None
    engine: str = ""  # registry name
    gpu_class: str = ""  # gddr, hbm, apple, amd (predict/corpus/load.py gpu_class); "" on the CPU

    def band(self, group: str, batch: int) -> tuple[float, float] | None:
        """The (lo, hi) factors of a figure group ("TTFT", "TPOT/ITL", "output tok/s") at `batch` sequences
        (`StepModel.band`)."""
        if self.model is None or self.provenance.source != "corpus":
            return None
        return self.model.band(self.engine, self.gpu_class, group, batch)


@dataclass(frozen=True)
class LevelFigure:
    """A predicted figure of a level: its key in the level (`key`), its label and unit for people, and the
    cross-validation groups whose band it takes, first found (group, inverse: the figure is the inverse of that
    group's, a per-stream rate against a per-token time, so the band's factors swap and invert)."""

    key: str
    label: str
    unit: str
    groups: tuple[tuple[str, bool], ...]
    value: Callable[[LevelStats], float | None]


# the figures a level's band covers: the corpus's figures are medians and throughputs, so tails (p99) get none.
# A serving figure takes its engine's serving band, else the serving band over every engine (a figure of an engine
# whose serving the corpus never measured, e.g. llama.cpp's TTFT under load: queueing is in it, which a llama-bench
# prompt rate never saw, so its narrower band would claim more than the corpus shows); only with no serving band
# at all its llama-bench counterpart's: a prompt's prefill rate for TTFT, the decode rate for TPOT/ITL (inverted)
LEVEL_FIGURES: tuple[LevelFigure, ...] = (
    LevelFigure(
        "ttft_ms_p50", "TTFT p50", "ms", (("TTFT", False), ("pp tok/s", True)), lambda s: s.ttft_ms.p50
    ),
    LevelFigure(
        "tpot_ms_p50", "TPOT p50", "ms", (("TPOT/ITL", False), ("tg tok/s", True)), lambda s: s.tpot_ms.p50
    ),
    LevelFigure(
        "itl_ms_p50", "ITL p50", "ms", (("TPOT/ITL", False), ("tg tok/s", True)), lambda s: s.itl_ms.p50
    ),
    LevelFigure(
        "per_stream_tok_s_p50",
        "stream tok/s p50",
        "tok/s",
        (("TPOT/ITL", True), ("tg tok/s", False)),
        lambda s: s.per_stream_tok_s.p50,
    ),
    LevelFigure(
        "output_tok_s", "output tok/s", "tok/s", (("output tok/s", False),), lambda s: s.output_tok_s or None
    ),
)


def level_batch(stats: LevelStats) -> int:
    """The sequences in flight a level's band is taken at: its concurrency, or for an open-loop level the mean
    in flight by Little's law (completed requests per second x mean latency)."""
    if stats.level.concurrency is not None:
        return stats.level.concurrency
    latency = stats.e2e_ms.mean
    if not stats.request_s or latency is None:
        return 1
    return max(1, round(stats.request_s * latency / 1e3))


def scaled(
    value: float, factors: tuple[float, float] | None, inverse: bool = False
) -> tuple[float, float] | None:
    """(low, high) of a figure `value` for band `factors` (lo, hi) of measured / predicted."""
    if factors is None:
        return None
    lo, hi = factors
    if inverse:
        lo, hi = (1 / hi if hi > 0 else 0.0), (1 / lo if lo > 0 else float("inf"))
    return value * lo, value * hi


def group_factors(
    pricing: Pricing, groups: tuple[tuple[str, bool], ...], batch: int
) -> tuple[tuple[float, float], str] | None:
    """The (lo, hi) factors of measured / predicted a figure is expected within at `batch` sequences, and the
    cross-validation group they came from: the first of `groups` with a band (its engine's, else every engine's),
    inverted where the figure is the inverse of its group's; None without one."""
    for group, inverse in groups:
        factors = scaled(1.0, pricing.band(group, batch), inverse)
        if factors is not None:
            return factors, group
    return None


def figure_factors(
    pricing: Pricing, figure: LevelFigure, batch: int
) -> tuple[tuple[float, float], str] | None:
    """`group_factors` of a level figure."""
    return group_factors(pricing, figure.groups, batch)


# The band of a latency distribution's tail: the band of its median figure. The step model's error is an error in
# the price of a step, and every latency of a level is a sum of steps, so it scales the tail as it scales the
# median; the corpus holds medians and throughputs and cannot say more. A chunk gap is an inter-token gap; an
# end-to-end latency is a TTFT and a decode, so it takes the envelope of both bands.
TAIL_FIGURES: dict[str, tuple[str, ...]] = {
    "ttft_ms": ("ttft_ms_p50",),
    "tpot_ms": ("tpot_ms_p50",),
    "itl_ms": ("itl_ms_p50",),
    "chunk_gap_ms": ("itl_ms_p50",),
    "e2e_ms": ("ttft_ms_p50", "tpot_ms_p50"),
}


def tail_factors(pricing: Pricing, metric: str, batch: int) -> tuple[float, float] | None:
    """The (lo, hi) factors of any percentile of the latency distribution `metric` ("ttft_ms", …, TAIL_FIGURES);
    None where its figures have no band (the plan's figures, a calibration, a figure cross-validation left too
    few rows of)."""
    by_key = {f.key: f for f in LEVEL_FIGURES}
    found = [figure_factors(pricing, by_key[k], batch) for k in TAIL_FIGURES.get(metric, ())]
    if not found or any(f is None for f in found):
        return None
    factors = [f[0] for f in found if f is not None]
    return min(lo for lo, _ in factors), max(hi for _, hi in factors)


def predicted_figures(stats: LevelStats, pricing: Pricing) -> dict[str, Any]:
    """A predicted level's figures with their bands and provenance, as the level keeps them (`predicted`)."""
    batch = level_batch(stats)
    figures: dict[str, Any] = {}
    for f in LEVEL_FIGURES:
        value = f.value(stats)
        if value is None:
            continue
        found = figure_factors(pricing, f, batch)
        band = None if found is None else scaled(value, found[0])
        of = None if found is None else found[1]
        figures[f.key] = {
            "value": value,
            "band": None if band is None else list(band),
            "band_of": of,
            "source": pricing.provenance.source,
        }
    return {**pricing.provenance.to_json(), "batch": batch, "figures": figures}


def band_number(x: float) -> str:
    """A band's end, to the digits a band deserves (it is a 10-90% range, not a measurement)."""
    if x >= 10:
        return f"{x:.0f}"
    if x >= 1:
        return f"{x:.1f}"
    return f"{x:.2g}"


def with_band(value: float | None, band: tuple[float, float] | list[float] | None, digits: int = 1) -> str:
    """`21.3 (17-26)`: the figure and its band; the figure alone without one; '-' without a figure."""
    if value is None:
        return "-"
    text = f"{value:.{digits}f}"
    if band is None:
        return text
    return f"{text} ({band_number(band[0])}-{band_number(band[1])})"

"""The advice's error bands (pure): a judged level's figures with the bands of the corpus-fitted step model
(predict/bands.py), and the SLOs judged at the bands' upper edge.

A band is (lo, hi) factors of measured / predicted: a low and a high quantile over the rows cross-validation left
out of the figure's regime (engine x GPU class x figure x batch range), chosen so that 80% of them fall inside
(docs/predict.md "Reading a band"). The goodput takes the band of "output
tok/s"; every percentile of a latency takes the band of its median figure (`tail_factors`: the model's error is
the price of a step, and every latency is a sum of steps). Figures priced by a calibration or by the plan alone
carry no band: advise takes them at their value.
"""

from __future__ import annotations

from dataclasses import dataclass

from servelab.advise.goal import Bound, misses
from servelab.predict.bands import LEVEL_FIGURES, Pricing, figure_factors, level_batch, tail_factors
from servelab.results.stats import LevelStats

GOODPUT_FIGURE = next(f for f in LEVEL_FIGURES if f.key == "output_tok_s")
TAILS = ("ttft_ms", "itl_ms", "chunk_gap_ms", "tpot_ms", "e2e_ms")


@dataclass(frozen=True)
class Bands:
    """A level's band factors: the goodput's, and each latency distribution's (any percentile of it); None /
    absent where the figure has none."""

    goodput: tuple[float, float] | None = None
    tails: tuple[tuple[str, tuple[float, float]], ...] = ()

    def tail(self, metric: str) -> tuple[float, float] | None:
        return dict(self.tails).get(metric)

    def upper(self, metric: str) -> float:
        """The factor at the band's upper edge of `metric` (1 without a band)."""
        band = self.tail(metric)
        return 1.0 if band is None else band[1]


def level_bands(pricing: Pricing | None, stats: LevelStats) -> Bands | None:
    """The bands of a level priced by `pricing`, at its batch (predict/bands.py `level_batch`); None unless the
    corpus fit priced it and has a band for one of its figures."""
    if pricing is None or pricing.model is None or pricing.provenance.source != "corpus":
        return None
    batch = level_batch(stats)
    goodput = figure_factors(pricing, GOODPUT_FIGURE, batch)
    tails = tuple((m, f) for m in TAILS if (f := tail_factors(pricing, m, batch)) is not None)
    if goodput is None and not tails:
        return None
    return Bands(None if goodput is None else goodput[0], tails)


def over_band(bounds: tuple[Bound, ...], stats: LevelStats, bands: Bands | None) -> tuple[str, ...]:
    """The SLOs `stats` breaks at its bands' upper edges (each percentile times its band's high factor), as
    `misses` words them; () without a band (the figure is taken at its value)."""
    if bands is None:
        return ()
    return misses(bounds, stats, bands.upper)

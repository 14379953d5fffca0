"""Each level of a stored run as the report sees it: the bench's `LevelStats` plus per-request samples.

The statistics are the ones the bench computed and stored with the level (`StoredRun.level_stats`);
nothing here recomputes them. Runs stored before the store kept level statistics (migration m002), and
levels a killed run never finished, get theirs from the same bench function (`bench.summary`) over the
stored records. The per-request samples (compare's tests, export's lists, the plots) are the records
themselves, in seconds. Only ``phase == "measure"`` records count.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import cast

from servelab.bench import metrics
from servelab.bench.server_metrics import pool_server_metrics
from servelab.bench.summary import summarize_records
from servelab.errors import StoreError
from servelab.predict.bands import LEVEL_FIGURES
from servelab.results.level_key import Level
from servelab.results.records import RequestRecord
from servelab.results.stats import LevelStats
from servelab.store import StoredRun

NS_PER_S = 1e9


@dataclass(frozen=True, kw_only=True)
class RequestFigures:
    """One successful request's figures, in seconds and tokens."""

    input_tokens: int
    output_tokens: int
    ttft_s: float
    latency_s: float
    itls_s: tuple[float, ...]
    tpot_s: float | None
    decode_tok_s: float | None


@dataclass(frozen=True)
class LevelFigures:
    target_index: int
    stats: LevelStats  # as the bench computed it, all repeats pooled
    requests: tuple[RequestFigures, ...]  # the successful requests, for per-request samples
    timeline: tuple[tuple[int, int, bool, bool], ...] = field(
        default=(), repr=False
    )  # sent, end, ok, evicted
    server: dict = field(default_factory=dict)  # the server's /metrics over the level, repeats pooled
    # a predicted level's `predicted` (predict/bands.py predicted_figures): each figure's band and source
    predicted: dict = field(default_factory=dict)

    @property
    def level(self) -> Level:
        return self.stats.level

    @property
    def label(self) -> str:
        return self.stats.level.label

    @property
    def concurrency(self) -> int | None:
        return self.stats.level.concurrency

    @property
    def rate_rps(self) -> float | None:
        return self.stats.level.rate_rps

    @property
    def completed(self) -> int:
        return self.stats.completed

    @property
    def failed(self) -> int:
        return self.stats.errors

    @property
    def evictions(self) -> int:
        return self.stats.evictions

    @property
    def errors_by_kind(self) -> dict[str, int]:
        return self.stats.errors_by_kind

    @property
    def error_examples(self) -> dict[str, str]:
        return self.stats.error_examples

    @property
    def aggregate_tok_s(self) -> float:
        """What the report calls aggregate throughput: the bench's steady-window output tok/s."""
        return self.stats.output_tok_s

    def band(self, key: str) -> tuple[float, float] | None:
        """The prediction's band (low, high) of figure `key` (predict/bands.py LEVEL_FIGURES: ttft_ms_p50,
        tpot_ms_p50, itl_ms_p50, per_stream_tok_s_p50, output_tok_s) around this level's value, repeats pooled;
        None for a measured level, a figure without a band, or a stored band that is not two numbers."""
        factors = _band_factors(self.predicted, key)
        spec = next((f for f in LEVEL_FIGURES if f.key == key), None)
        value = None if spec is None or factors is None else spec.value(self.stats)
        if value is None or factors is None:
            return None
        return value * factors[0], value * factors[1]

    @property
    def band_source(self) -> str | None:
        """Where a predicted level's parameters came from (corpus, calibration, plan); None when measured."""
        source = self.predicted.get("source")
        return source if isinstance(source, str) else None


def _number(x: object) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def _band_factors(predicted: dict, key: str) -> tuple[float, float] | None:
    """(lo, hi) of a stored band over the value it was stored with (the store is outside data: checked)."""
    figures = predicted.get("figures")
    entry = figures.get(key) if isinstance(figures, dict) else None
    if not isinstance(entry, dict):
        return None
    value, band = entry.get("value"), entry.get("band")
    if not isinstance(band, list) or len(band) != 2 or not all(map(_number, (value, *band))):
        return None
    low, high, at = float(band[0]), float(band[1]), float(cast(float, value))
    if at <= 0 or low < 0 or low > high:
        return None
    return low / at, high / at


def _s(ms: float | None) -> float | None:
    return None if ms is None else ms / 1e3


def request_figures(record: RequestRecord) -> RequestFigures | None:
    """Figures of one successful request; None for a failure or a request with no content."""
    ttft_ms = metrics.ttft_ms(record)
    if record.status != "ok" or ttft_ms is None:
        return None
    e2e_ms = metrics.e2e_ms(record)
    out = record.output_tokens if record.output_tokens is not None else sum(record.chunk_tokens)
    return RequestFigures(
        input_tokens=record.prompt_tokens or 0,
        output_tokens=out,
        ttft_s=ttft_ms / 1e3,
        latency_s=(record.end_ns - record.sent_ns) / NS_PER_S if e2e_ms is None else e2e_ms / 1e3,
        itls_s=tuple(x / 1e3 for x in metrics.itl_samples_ms(record)),
        tpot_s=_s(metrics.tpot_ms(record)),
        decode_tok_s=metrics.decode_tok_s(record),
    )


def level_figures(
    target_index: int,
    level: Level,
    records: Sequence[RequestRecord],
    stats: LevelStats | None = None,
    server: dict | None = None,
    predicted: dict | None = None,
) -> LevelFigures:
    """One (target, level): its `stats` (computed from `records` when the store had none) and its samples."""
    measured = [r for r in records if r.phase == "measure"]
    return LevelFigures(
        target_index=target_index,
        stats=summarize_records(measured, level) if stats is None else stats,
        requests=tuple(f for f in map(request_figures, measured) if f is not None),
        timeline=tuple((r.sent_ns, r.end_ns, r.status == "ok", r.evicted) for r in measured),
        server=server or {},
        predicted=predicted or {},
    )


def _level(run: StoredRun, label: str) -> Level:
    try:
        return Level.parse(label)
    except ValueError as exc:
        raise StoreError(f"run {run.id}: {exc}") from None


def all_level_figures(run: StoredRun) -> list[LevelFigures]:
    """Figures for every (target, level) of a stored run, in target order then ladder order."""
    groups: dict[tuple[int, Level], list[RequestRecord]] = {key: [] for key in run.level_stats}
    for r in run.requests:
        groups.setdefault((r.target_index, _level(run, r.level)), []).append(r)
    keys = sorted(groups, key=lambda key: (key[0], key[1].sort_key))
    servers, predicted = _server_figures(run), _predicted_figures(run)
    return [
        level_figures(
            t, lv, groups[(t, lv)], run.level_stats.get((t, lv)), servers.get((t, lv)), predicted.get((t, lv))
        )
        for t, lv in keys
    ]


def _predicted_figures(run: StoredRun) -> dict[tuple[int, Level], dict]:
    """Each predicted (target, level)'s stored bands and provenance (its first repeat's: a band's factors are
    its regime's, the same for every repeat)."""
    found: dict[tuple[int, Level], dict] = {}
    for stored in sorted(run.levels, key=lambda s: s.repeat):
        if stored.summary.predicted:
            found.setdefault((stored.target_index, stored.level), stored.summary.predicted)
    return found


def _server_figures(run: StoredRun) -> dict[tuple[int, Level], dict]:
    """Each (target, level)'s stored server figures, its repeats pooled as the bench pools them."""
    repeats: dict[tuple[int, Level], list[dict]] = {}
    for stored in run.levels:
        if stored.summary.server:
            repeats.setdefault((stored.target_index, stored.level), []).append(stored.summary.server)
    return {key: pool_server_metrics(found) for key, found in repeats.items()}

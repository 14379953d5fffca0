"""One level's `LevelStats`, computed from its raw RequestRecords (never from other summaries).

`summarize_level` is the one place a level's figures are computed; `pool_repeats` puts the repeats of a
level together (distributions from all their records, throughputs as the mean ± 95% CI over repeats).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from servelab.bench import metrics as m
from servelab.bench.schedule import Window, confidence_interval, steady_window
from servelab.results.level_key import Level
from servelab.results.records import RequestRecord
from servelab.results.stats import Distribution, LevelStats, TokenCounts

NS_PER_S = 1e9


def _values(records: Sequence[RequestRecord], fn) -> list[float]:
    return [v for v in (fn(r) for r in records) if v is not None]


def summarize_level(
    records: Sequence[RequestRecord], level: Level, slo: m.Slo | None = None, ramp_s: float | None = None
) -> LevelStats:
    """Every figure of one level (repeat) from its measured records; warm-up and ramp records are left out
    (the ramp's are counted in ``ramp_requests``)."""
    measured = [r for r in records if r.phase == "measure"]
    ok = [r for r in measured if r.status == "ok"]
    failed = [r for r in measured if r.status != "ok"]
    errors = Counter(r.error_kind or "unknown" for r in failed)
    examples: dict[str, str] = {}
    for r in failed:
        examples.setdefault(r.error_kind or "unknown", r.error or "")
    slots = level.concurrency or max(1, _peak_inflight(measured))
    window = steady_window([(r.sent_ns, r.end_ns) for r in measured], slots)
    chunks = _Chunks(ok)
    itl, gaps = chunks.gap_distributions()
    stats = LevelStats(
        level=level,
        requests=len(measured),
        completed=len(ok),
        errors=len(failed),
        errors_by_kind=dict(sorted(errors.items())),
        error_examples=examples,
        evictions=sum(1 for r in ok if r.evicted),
        ttft_ms=Distribution.of(_values(ok, m.ttft_ms)),
        itl_ms=itl,
        chunk_gap_ms=gaps,
        tpot_ms=Distribution.of(_values(ok, m.tpot_ms)),
        e2e_ms=Distribution.of(_values(ok, m.e2e_ms)),
        per_stream_tok_s=Distribution.of(_values(ok, m.decode_tok_s)),
        prefill_tok_s=Distribution.of(_values(ok, m.prefill_tok_s)),
        tokens=_token_counts(ok),
        window=window,
        **_throughput(ok, window, chunks),
        duration_s=_span_s(measured),
        first_send_ns=min((r.sent_ns for r in measured), default=None),
        **_open_loop(measured, ok),
        ramp_s=ramp_s,
        ramp_requests=sum(1 for r in records if r.phase == "ramp"),
    )
    if slo is not None and not slo.empty:
        good = [r for r in measured if slo.met_by(r)]
        goodput = _in_window(good, window) / window.seconds if window else 0.0
        stats = replace(
            stats, goodput_req_s=goodput, slo_attainment=len(good) / len(measured) if measured else None
        )
    return stats


def pool_repeats(
    repeats: Sequence[tuple[Sequence[RequestRecord], LevelStats]],
    level: Level,
    slo: m.Slo | None = None,
    ramp_s: float | None = None,
) -> LevelStats:
    """One level across its repeats: distributions from all raw records, throughputs as mean ± 95% CI,
    durations summed."""
    if len(repeats) == 1:
        return repeats[0][1]
    pooled = summarize_level([r for records, _ in repeats for r in records], level, slo, ramp_s)
    each = [stats for _, stats in repeats]
    means, ci = {}, {}
    for key in ("output_tok_s", "total_tok_s", "request_s"):
        values = [getattr(s, key) for s in each]
        means[key] = sum(values) / len(values)
        ci[key] = confidence_interval(values)
    for key in ("ttft_ms", "per_stream_tok_s"):
        values = [getattr(s, key).p50 for s in each if getattr(s, key).p50 is not None]
        ci[f"{key}_p50"] = confidence_interval(values)
    return replace(pooled, **means, repeats=len(each), ci95=ci, duration_s=sum(s.duration_s for s in each))


def summarize_records(records: Sequence[RequestRecord], level: Level) -> LevelStats:
    """A level's stats from its records of every repeat, as the bench would have pooled them: for readers of
    runs stored before the store kept `LevelStats` (and of levels a killed run never finished)."""
    by_repeat: dict[int, list[RequestRecord]] = {}
    for r in records:
        if r.phase == "measure":
            by_repeat.setdefault(r.repeat, []).append(r)
    repeats = [(rs, summarize_level(rs, level)) for _, rs in sorted(by_repeat.items())]
    return pool_repeats(repeats, level) if repeats else summarize_level([], level)


def _throughput(ok: Sequence[RequestRecord], window: Window | None, chunks: _Chunks) -> dict[str, Any]:
    if window is None:
        return {"output_tok_s": 0.0, "total_tok_s": 0.0, "request_s": 0.0}
    out = chunks.tokens_in_window(window.t0_ns, window.t1_ns)
    prompt = sum(
        r.prompt_tokens or 0
        for r in ok
        if r.first_token_ns and window.t0_ns <= r.first_token_ns <= window.t1_ns
    )
    return {
        "output_tok_s": out / window.seconds,
        "total_tok_s": (out + prompt) / window.seconds,
        "request_s": _in_window(ok, window) / window.seconds,
    }


class _Chunks:
    """The measured records' chunk stamps and chunk token counts, one record after another (int64), for a level's
    hot loops in numpy: the same figures as the per-record functions of bench/metrics.py, which serve instead
    (`aligned` false) when some record's token counts differ in length from its stamps."""

    def __init__(self, ok: Sequence[RequestRecord]) -> None:
        self.ok = ok
        self.aligned = all(len(r.chunk_ns) == len(r.chunk_tokens) for r in ok)
        if self.aligned:
            self.stamps, self.tokens = _concatenated(ok)

    def gap_distributions(self) -> tuple[Distribution, Distribution]:
        """`itl_ms` and `chunk_gap_ms` (`m.itl_samples_ms`, `m.chunk_gaps_ms` of every record): the same floats,
        int64 gaps / 1e6 / n in float64 as Python divides them; Distribution sorts its samples, so their order
        does not count."""
        ok = self.ok
        if not self.aligned:
            return (
                Distribution.of([x for r in ok for x in m.itl_samples_ms(r)]),
                Distribution.of([x for r in ok for x in m.chunk_gaps_ms(r)]),
            )
        stamps, tokens = self.stamps, self.tokens
        starts = np.cumsum([len(r.chunk_ns) for r in ok], dtype=np.int64)[:-1]
        inside = np.ones(len(stamps), dtype=bool)  # a gap within one record, not from one to the next
        inside[starts[starts < len(stamps)]] = False
        gaps_ms = np.diff(stamps)[inside[1:]].astype(float) / 1e6
        n = tokens[1:][inside[1:]]
        some = n > 0
        itl = np.repeat(gaps_ms[some] / n[some], n[some])
        return Distribution.of(itl), Distribution.of(gaps_ms)

    def tokens_in_window(self, t0_ns: int, t1_ns: int) -> int:
        """`m.tokens_in_window` of the records."""
        if not self.aligned:
            return m.tokens_in_window(self.ok, t0_ns, t1_ns)
        return int(self.tokens[(self.stamps >= t0_ns) & (self.stamps <= t1_ns)].sum())


def _concatenated(records: Sequence[RequestRecord]) -> tuple[np.ndarray, np.ndarray]:
    """Every record's chunk stamps and chunk token counts, one after another (int64)."""
    if not records:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    stamps = np.concatenate([np.asarray(r.chunk_ns, dtype=np.int64) for r in records])
    tokens = np.concatenate([np.asarray(r.chunk_tokens, dtype=np.int64) for r in records])
    return stamps, tokens


def _in_window(records: Sequence[RequestRecord], window: Window) -> int:
    return sum(1 for r in records if len(r.chunk_ns) and window.t0_ns <= r.chunk_ns[-1] <= window.t1_ns)


def _span_s(measured: Sequence[RequestRecord]) -> float:
    """First send to last end of one repeat's measured requests."""
    if not measured:
        return 0.0
    return (max(r.end_ns for r in measured) - min(r.sent_ns for r in measured)) / NS_PER_S


def _open_loop(measured: Sequence[RequestRecord], ok: Sequence[RequestRecord]) -> dict[str, Any]:
    late = _values(measured, m.lateness_ms)
    if not late or all(r.intended_ns == r.sent_ns for r in measured):
        return {}
    return {
        "lateness_ms": Distribution.of(late),
        "ttft_sched_ms": Distribution.of(_values(ok, m.ttft_sched_ms)),
    }


def _token_counts(ok: Sequence[RequestRecord]) -> TokenCounts:
    return TokenCounts(
        output=sum(r.output_tokens if r.output_tokens is not None else sum(r.chunk_tokens) for r in ok),
        prompt=sum(r.prompt_tokens or 0 for r in ok),
        source=dict(Counter(r.tokens_source for r in ok)),
        chunk_source=dict(Counter(r.chunk_tokens_source or "none" for r in ok)),
        mismatches=sum(1 for r in ok if r.token_mismatch),
        early_eos=sum(1 for r in ok if r.early_eos),
    )


def _peak_inflight(records: Sequence[RequestRecord]) -> int:
    events = sorted(
        [(r.sent_ns, 1) for r in records] + [(r.end_ns, -1) for r in records], key=lambda x: (x[0], x[1])
    )
    peak = inflight = 0
    for _, step in events:
        inflight += step
        peak = max(peak, inflight)
    return peak

"""Per-level figures recomputed from stored RequestRecords (never from averaged summaries).

Per-request metrics are the bench's own definitions (servelab.bench.metrics, docs/metrics.md): TTFT,
E2E, TPOT, per-token ITL, per-stream decode tok/s. On top, the vLLM-style level totals the export needs:
throughputs = totals / level duration (first send to last end, summed over repeats), and the bench's
steady-window aggregate (`steady_output_tok_s`) that the report and compare show.
Only ``phase == "measure"`` records count.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from servelab.bench import metrics
from servelab.bench.records import RequestRecord
from servelab.bench.summary import summarize_level

NS_PER_S = 1e9
PERCENTILES = (50, 90, 95, 99)


@dataclass(frozen=True)
class Distribution:
    """Summary of samples in one unit (named by the field holding it)."""

    count: int
    mean: float | None
    median: float | None
    std: float | None
    p: dict[int, float | None]  # percentile -> value

    @classmethod
    def of(cls, samples: Sequence[float]) -> Distribution:
        if not len(samples):
            return cls(0, None, None, None, {q: None for q in PERCENTILES})
        values = np.asarray(samples, dtype=float)
        p = {q: metrics.percentile(samples, q) for q in PERCENTILES}
        return cls(len(values), float(values.mean()), metrics.percentile(samples, 50), float(values.std()), p)


@dataclass(frozen=True)
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
    level: str
    concurrency: float | None  # "c=4" -> 4; open-loop "r=2.5" -> None
    rate_rps: float | None
    requests: tuple[RequestFigures, ...]
    completed: int
    failed: int
    errors_by_kind: dict[str, int]
    evictions: int
    duration_s: float
    ttft_ms: Distribution
    tpot_ms: Distribution
    itl_ms: Distribution
    e2el_ms: Distribution
    decode_tok_s: Distribution
    steady_output_tok_s: float | None = None  # the bench's steady-window aggregate
    error_examples: dict[str, str] = field(default_factory=dict)  # error kind -> the first message seen
    first_send_ns: int | None = None
    timeline: tuple[tuple[int, int, bool, bool], ...] = field(
        default=(), repr=False
    )  # sent, end, ok, evicted

    @property
    def total_input_tokens(self) -> int:
        return sum(r.input_tokens for r in self.requests)

    @property
    def total_output_tokens(self) -> int:
        return sum(r.output_tokens for r in self.requests)

    @property
    def output_tok_s(self) -> float:
        return self.total_output_tokens / self.duration_s if self.duration_s > 0 else 0.0

    @property
    def aggregate_tok_s(self) -> float:
        """What the report calls aggregate throughput: the bench's steady-window figure when there is one."""
        return self.output_tok_s if self.steady_output_tok_s is None else self.steady_output_tok_s

    @property
    def request_rps(self) -> float:
        return self.completed / self.duration_s if self.duration_s > 0 else 0.0

    @property
    def total_tok_s(self) -> float:
        total = self.total_input_tokens + self.total_output_tokens
        return total / self.duration_s if self.duration_s > 0 else 0.0


def parse_level(level: str) -> tuple[float | None, float | None]:
    """("c=4") -> (4, None); ("r=2.5") -> (None, 2.5); anything else -> (None, None)."""
    kind, _, value = level.partition("=")
    try:
        number = float(value)
    except ValueError:
        return None, None
    if kind == "c":
        return (int(number) if number.is_integer() else number), None
    return (None, number) if kind == "r" else (None, None)


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


def _steady_output_tok_s(records: Sequence[RequestRecord], concurrency: int | None) -> float | None:
    """The bench's steady-window aggregate output tok/s, averaged over repeats."""
    by_repeat: dict[int, list[RequestRecord]] = {}
    for r in records:
        by_repeat.setdefault(r.repeat, []).append(r)
    values = [summarize_level(rs, concurrency)["output_tok_s"] for rs in by_repeat.values()]
    return sum(values) / len(values) if values else None


def _duration_s(records: Sequence[RequestRecord]) -> float:
    by_repeat: dict[int, list[RequestRecord]] = {}
    for r in records:
        by_repeat.setdefault(r.repeat, []).append(r)
    spans = (max(r.end_ns for r in rs) - min(r.sent_ns for r in rs) for rs in by_repeat.values())
    return sum(spans) / NS_PER_S


def level_figures(target_index: int, level: str, records: Sequence[RequestRecord]) -> LevelFigures:
    """The figures of one (target, level) from its measured records, all repeats pooled."""
    measured = [r for r in records if r.phase == "measure"]
    figures = tuple(f for f in map(request_figures, measured) if f is not None)
    errors: dict[str, int] = {}
    examples: dict[str, str] = {}
    for r in measured:
        if r.status != "ok":
            kind = r.error_kind or "unknown"
            errors[kind] = errors.get(kind, 0) + 1
            examples.setdefault(kind, r.error or "")
    concurrency, rate = parse_level(level)
    return LevelFigures(
        target_index=target_index,
        level=level,
        concurrency=concurrency,
        rate_rps=rate,
        requests=figures,
        completed=len(figures),
        failed=len(measured) - len(figures),
        errors_by_kind=errors,
        error_examples=examples,
        evictions=sum(r.evicted for r in measured),
        duration_s=_duration_s(measured) if measured else 0.0,
        ttft_ms=Distribution.of([f.ttft_s * 1e3 for f in figures]),
        tpot_ms=Distribution.of([f.tpot_s * 1e3 for f in figures if f.tpot_s is not None]),
        itl_ms=Distribution.of([x * 1e3 for f in figures for x in f.itls_s]),
        e2el_ms=Distribution.of([f.latency_s * 1e3 for f in figures]),
        decode_tok_s=Distribution.of([f.decode_tok_s for f in figures if f.decode_tok_s is not None]),
        steady_output_tok_s=_steady_output_tok_s(
            measured, concurrency if isinstance(concurrency, int) else None
        ),
        first_send_ns=min((r.sent_ns for r in measured), default=None),
        timeline=tuple((r.sent_ns, r.end_ns, r.status == "ok", r.evicted) for r in measured),
    )


def all_level_figures(records: Iterable[RequestRecord]) -> list[LevelFigures]:
    """Figures for every (target, level) present, in target order then ladder order."""
    groups: dict[tuple[int, str], list[RequestRecord]] = {}
    for r in records:
        groups.setdefault((r.target_index, r.level), []).append(r)

    def order(key: tuple[int, str]) -> tuple:
        concurrency, rate = parse_level(key[1])
        return (key[0], concurrency is None, concurrency or rate or 0.0, key[1])

    return [level_figures(t, level, groups[(t, level)]) for t, level in sorted(groups, key=order)]

"""The statistics of one level as typed values: `Distribution`, `TokenCounts`, `LevelStats`, and the level's
document `LevelSummary` (its statistics and the bench's verdict on them).

bench computes them once (`bench.summary`), the store keeps them with the level, and report, compare,
export and demo read them back; nobody recomputes a figure. Dicts exist only at the JSON edge
(`to_json` / `from_json`; the keys are documented in docs/results-schema.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

import numpy as np

from servelab.results.level_key import Level

PERCENTILES = (50.0, 90.0, 95.0, 99.0, 99.9)
_PERCENTILE_FIELDS = ("p50", "p90", "p95", "p99", "p99_9")


@dataclass(frozen=True)
class Window:
    t0_ns: int
    t1_ns: int
    steady: bool  # False: the level never had every slot busy; the window is the whole level

    @property
    def seconds(self) -> float:
        return max(self.t1_ns - self.t0_ns, 1) / 1e9


@dataclass(frozen=True, kw_only=True)
class Distribution:
    """n samples in one unit (named by the field holding it). Percentiles are linear between closest ranks
    (Hyndman–Fan type 7, numpy's default, docs/metrics.md); `std` is the population standard deviation."""

    n: int = 0
    mean: float | None = None
    std: float | None = None
    min: float | None = None
    max: float | None = None
    p50: float | None = None
    p90: float | None = None
    p95: float | None = None
    p99: float | None = None
    p99_9: float | None = None

    @classmethod
    def of(cls, samples: Sequence[float] | np.ndarray) -> Distribution:
        if not len(samples):
            return cls()
        # sorted first: mean and std come out bit for bit the same whatever order the records arrived in
        # (records merged from several workers: bench/fleet.py)
        values = np.sort(np.asarray(samples, dtype=float))
        points = np.percentile(values, PERCENTILES, method="linear")
        return cls(
            n=len(values),
            mean=float(values.mean()),
            std=float(values.std()),
            min=float(values.min()),
            max=float(values.max()),
            **{name: float(p) for name, p in zip(_PERCENTILE_FIELDS, points, strict=True)},
        )

    @property
    def median(self) -> float | None:
        return self.p50

    def percentile(self, p: float) -> float | None:
        """One of the stored percentiles (50, 90, 95, 99, 99.9)."""
        return getattr(self, _PERCENTILE_FIELDS[PERCENTILES.index(float(p))])

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {name: getattr(self, name) for name in _PERCENTILE_FIELDS}
        out.update(mean=self.mean, std=self.std, min=self.min, max=self.max, n=self.n)
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Distribution:
        names = ("n", "mean", "std", "min", "max", *_PERCENTILE_FIELDS)
        fields: dict[str, Any] = {name: data.get(name) for name in names if name in data}
        return cls(**fields)


@dataclass(frozen=True)
class TokenCounts:
    """Tokens of the level's completed requests and where their counts came from."""

    output: int = 0  # the server's count where it gave one, else the client's
    prompt: int = 0
    source: dict[str, int] = field(default_factory=dict)  # tokens_source -> requests
    chunk_source: dict[str, int] = field(default_factory=dict)
    mismatches: int = 0
    early_eos: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "output": self.output,
            "prompt": self.prompt,
            "source": dict(self.source),
            "chunk_source": dict(self.chunk_source),
            "mismatches": self.mismatches,
            "early_eos": self.early_eos,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TokenCounts:
        return cls(**data)


Interval = tuple[float, float]  # (mean, half-width) of a 95% t-interval over repeats

DISTRIBUTIONS = (
    "ttft_ms",
    "itl_ms",
    "chunk_gap_ms",
    "tpot_ms",
    "e2e_ms",
    "per_stream_tok_s",
    "prefill_tok_s",
)
OPEN_LOOP_DISTRIBUTIONS = ("lateness_ms", "ttft_sched_ms")


@dataclass(frozen=True, kw_only=True)
class LevelStats:
    """Every figure of one level (one repeat, or all repeats pooled), measured requests only.

    Throughputs come in two kinds: `output_tok_s`/`total_tok_s`/`request_s` count what arrived inside the
    steady window (docs/metrics.md; the mean over repeats), what report and compare call aggregate
    throughput; the `duration_*` properties divide totals by `duration_s` (first send to last end, summed
    over repeats), as vLLM's results do.
    """

    level: Level
    requests: int = 0
    completed: int = 0
    errors: int = 0
    errors_by_kind: dict[str, int] = field(default_factory=dict)
    error_examples: dict[str, str] = field(default_factory=dict)  # error kind -> the first message seen
    evictions: int = 0
    ttft_ms: Distribution = Distribution()
    itl_ms: Distribution = Distribution()
    chunk_gap_ms: Distribution = Distribution()
    tpot_ms: Distribution = Distribution()
    e2e_ms: Distribution = Distribution()
    per_stream_tok_s: Distribution = Distribution()
    prefill_tok_s: Distribution = Distribution()
    tokens: TokenCounts = TokenCounts()
    window: Window | None = None
    output_tok_s: float = 0.0
    total_tok_s: float = 0.0
    request_s: float = 0.0
    duration_s: float = 0.0
    first_send_ns: int | None = None
    repeats: int = 1
    lateness_ms: Distribution | None = None  # open loop only
    ttft_sched_ms: Distribution | None = None
    goodput_req_s: float | None = None  # with an SLO only
    slo_attainment: float | None = None
    ci95: dict[str, Interval | None] = field(default_factory=dict)  # several repeats only
    ramp_s: float | None = None  # --ramp only: its seconds at the start of each repeat ...
    ramp_requests: int = 0  # ... and the requests sent during it (stored, in no figure)

    @property
    def duration_output_tok_s(self) -> float:
        return self.tokens.output / self.duration_s if self.duration_s > 0 else 0.0

    @property
    def duration_total_tok_s(self) -> float:
        total = self.tokens.output + self.tokens.prompt
        return total / self.duration_s if self.duration_s > 0 else 0.0

    @property
    def duration_request_s(self) -> float:
        return self.completed / self.duration_s if self.duration_s > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "level": self.level.label,
            "concurrency": self.level.concurrency,
            "rate": self.level.rate_rps,
            "repeats": self.repeats,
            "requests": self.requests,
            "completed": self.completed,
            "errors": self.errors,
            "errors_by_kind": dict(self.errors_by_kind),
            "error_examples": dict(self.error_examples),
            "evictions": self.evictions,
        }
        out.update({name: getattr(self, name).to_json() for name in DISTRIBUTIONS})
        out["tokens"] = self.tokens.to_json()
        out["window"] = None if self.window is None else _window_json(self.window)
        out.update(
            output_tok_s=self.output_tok_s,
            total_tok_s=self.total_tok_s,
            request_s=self.request_s,
            duration_s=self.duration_s,
            first_send_ns=self.first_send_ns,
        )
        for name in OPEN_LOOP_DISTRIBUTIONS:
            if getattr(self, name) is not None:
                out[name] = getattr(self, name).to_json()
        if self.goodput_req_s is not None or self.slo_attainment is not None:
            out.update(goodput_req_s=self.goodput_req_s, slo_attainment=self.slo_attainment)
        if self.ramp_s is not None:
            out["ramp"] = {"seconds": self.ramp_s, "requests": self.ramp_requests, "in_statistics": False}
        if self.ci95:
            out["ci95"] = {
                k: None if v is None else {"mean": v[0], "half_width": v[1]} for k, v in self.ci95.items()
            }
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LevelStats:
        """Read what `to_json` wrote (a KeyError or TypeError for anything else)."""
        window, ramp = data["window"], data.get("ramp")
        ci95 = {
            k: None if v is None else (v["mean"], v["half_width"]) for k, v in data.get("ci95", {}).items()
        }
        return cls(
            level=Level.parse(data["level"]),
            repeats=data["repeats"],
            requests=data["requests"],
            completed=data["completed"],
            errors=data["errors"],
            errors_by_kind=data["errors_by_kind"],
            error_examples=data["error_examples"],
            evictions=data["evictions"],
            **{name: Distribution.from_json(data[name]) for name in DISTRIBUTIONS},
            **{name: Distribution.from_json(data[name]) for name in OPEN_LOOP_DISTRIBUTIONS if name in data},
            tokens=TokenCounts.from_json(data["tokens"]),
            window=None if window is None else Window(window["t0_ns"], window["t1_ns"], window["steady"]),
            output_tok_s=data["output_tok_s"],
            total_tok_s=data["total_tok_s"],
            request_s=data["request_s"],
            duration_s=data["duration_s"],
            first_send_ns=data["first_send_ns"],
            goodput_req_s=data.get("goodput_req_s"),
            slo_attainment=data.get("slo_attainment"),
            ci95=ci95,
            ramp_s=None if ramp is None else ramp["seconds"],
            ramp_requests=0 if ramp is None else ramp["requests"],
        )


def _window_json(window: Window) -> dict[str, Any]:
    return {"t0_ns": window.t0_ns, "t1_ns": window.t1_ns, "seconds": window.seconds, "steady": window.steady}


LEVEL_KEYS = (
    "level",
    "concurrency",
    "rate",
    "repeats",
    "requests",
    "completed",
    "errors",
    "errors_by_kind",
    "error_examples",
    "evictions",
    "valid",
    "invalid_reason",
    "partial",
    "ttft_ms",
    "itl_ms",
    "chunk_gap_ms",
    "tpot_ms",
    "e2e_ms",
    "per_stream_tok_s",
    "prefill_tok_s",
    "output_tok_s",
    "total_tok_s",
    "request_s",
    "goodput_req_s",
    "slo_attainment",
    "lateness_ms",
    "ttft_sched_ms",
    "tokens",
    "window",
    "ramp",
    "duration_s",
    "first_send_ns",
    "client",
    "server",
    "ci95",
    "predicted",
)  # (the order of a level object in `bench --json` and in the store; docs/results-schema.md)


@dataclass(frozen=True)
class LevelSummary:
    """One level (one repeat, or all repeats pooled): its figures and the bench's verdict on them; the store's
    `levels` row of one repeat."""

    stats: LevelStats
    _: KW_ONLY  # the rest by name
    valid: bool = True  # False when the client could not keep up (event-loop lag, CPU)
    invalid_reason: str | None = None
    partial: bool = False  # the run was interrupted during this level
    client: dict[str, Any] = field(
        default_factory=dict
    )  # the client's event-loop lag and CPU (bench/monitor.py)
    server: dict[str, Any] = field(
        default_factory=dict
    )  # the server's /metrics over the level (bench/server_metrics.py); written only when there is one
    # a predicted level (servelab predict): where its figures' parameters came from and each figure's band
    # (predict/bands.py `predicted_figures`); written only for a predicted level
    predicted: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        values = {
            **self.stats.to_json(),
            "valid": self.valid,
            "invalid_reason": self.invalid_reason,
            "partial": self.partial,
            "client": self.client,
        }
        if self.server:  # engines whose extras follow /metrics series (vLLM)
            values["server"] = self.server
        if self.predicted:
            values["predicted"] = self.predicted
        return {key: values[key] for key in LEVEL_KEYS if key in values}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LevelSummary:
        """Read what `to_json` wrote (a KeyError or TypeError for anything else)."""
        return cls(
            LevelStats.from_json(data),
            valid=data["valid"],
            invalid_reason=data["invalid_reason"],
            partial=data["partial"],
            client=data["client"],
            server=data.get("server", {}),
            predicted=data.get("predicted", {}),
        )

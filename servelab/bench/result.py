"""What a benchmark run returns: per target, per level, its `LevelStats` and whether to trust them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from servelab.bench.rate_search import MaxRate
from servelab.results.stats import LevelStats

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
)  # fmt: skip  (the order of a level object in `bench --json` and in the store; docs/results-schema.md)


@dataclass(frozen=True)
class LevelResult:
    """One level (one repeat, or all repeats pooled): its figures and the bench's verdict on them."""

    stats: LevelStats
    valid: bool = True  # False when the client could not keep up (event-loop lag, CPU)
    invalid_reason: str | None = None
    partial: bool = False  # the run was interrupted during this level
    client: dict[str, Any] = field(default_factory=dict)  # the client's event-loop lag and CPU
    server: dict[str, Any] = field(
        default_factory=dict
    )  # the server's /metrics over the level (server_metrics.py)
    # a predicted level (servelab predict): where its figures' parameters came from and each figure's band
    # (predict/bands.py `level_figures`); empty for a measured level
    predicted: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        values = {**self.stats.to_json(), "valid": self.valid, "invalid_reason": self.invalid_reason,
                  "partial": self.partial, "client": self.client}  # fmt: skip
        if self.server:  # engines whose extras follow /metrics series (vLLM)
            values["server"] = self.server
        if self.predicted:
            values["predicted"] = self.predicted
        return {key: values[key] for key in LEVEL_KEYS if key in values}


@dataclass
class TargetResult:
    url: str
    engine: str
    model: str
    context_per_slot: int | None = None
    levels: list[LevelResult] = field(default_factory=list)
    max_rate: MaxRate | None = None  # --find-max-rate: the answer and its bracket


@dataclass
class BenchResult:
    run_id: str | None
    partial: bool
    targets: list[TargetResult] = field(default_factory=list)

    def failed_levels(self) -> list[str]:
        """``URL LEVEL (kind: n, ...)`` for each level where requests were sent and none completed."""
        return [
            f"{t.url} {lv.stats.level} ({', '.join(f'{k}: {n}' for k, n in lv.stats.errors_by_kind.items())})"
            for t in self.targets
            for lv in t.levels
            if lv.stats.completed == 0 and lv.stats.errors > 0
        ]

    def to_json(self) -> dict[str, Any]:
        """The --json document: run_id, partial, targets[url, engine, model, levels[...]]."""
        return {
            "run_id": self.run_id,
            "partial": self.partial,
            "targets": [
                {
                    "url": t.url,
                    "engine": t.engine,
                    "model": t.model,
                    "context_per_slot": t.context_per_slot,
                    "levels": [level.to_json() for level in t.levels],
                    **({} if t.max_rate is None else {"max_rate": t.max_rate.to_json()}),
                }
                for t in self.targets
            ],
        }

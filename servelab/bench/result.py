"""What a benchmark run returns: per target, per level, the recomputed summaries."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

LEVEL_KEYS = (
    "level", "concurrency", "rate", "repeats", "requests", "completed", "errors", "errors_by_kind", "evictions",
    "valid", "invalid_reason", "partial", "ttft_ms", "itl_ms", "chunk_gap_ms", "tpot_ms", "e2e_ms",
    "per_stream_tok_s", "prefill_tok_s", "output_tok_s", "total_tok_s", "request_s", "goodput_req_s",
    "slo_attainment", "lateness_ms", "ttft_sched_ms", "tokens", "window", "client", "ci95",
)  # fmt: skip


@dataclass
class TargetResult:
    url: str
    engine: str
    model: str
    context_per_slot: int | None = None
    levels: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class BenchResult:
    run_id: str | None
    partial: bool
    targets: list[TargetResult] = field(default_factory=list)

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
                    "levels": [{k: level[k] for k in LEVEL_KEYS if k in level} for level in t.levels],
                }
                for t in self.targets
            ],
        }

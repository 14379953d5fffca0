"""What a benchmark run returns: per target, per level, its `LevelSummary` (statistics and whether to trust them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from servelab.bench.rate_search import MaxRate
from servelab.results.stats import LevelSummary


@dataclass
class TargetResult:
    url: str
    engine: str
    model: str
    context_per_slot: int | None = None
    levels: list[LevelSummary] = field(default_factory=list)
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

"""How many prompts a run builds and each level uses (pure): the runner and `servelab predict` share them."""

from __future__ import annotations

from servelab.bench.config import BenchConfig
from servelab.bench.ladder import most_levels


def prompt_count(config: BenchConfig) -> int:
    """Prompts for the whole run: every level's, every repeat."""
    per_level = sum(level_prompts(config, c) for c in level_slots(config))
    return per_level * config.repeat


def level_slots(config: BenchConfig) -> tuple[int, ...]:
    """Requests in flight per level: the ladder's concurrencies, or 1 for each open-loop level's warm-up (a
    rate search runs up to its probes)."""
    return (1,) * most_levels(config) if config.rate is not None else config.concurrency


def warmup_requests(config: BenchConfig, slots: int) -> int:
    return config.warmup_requests(slots)


def level_prompts(config: BenchConfig, slots: int) -> int:
    """Prompts one repeat of a level takes (warm-up included)."""
    stop = config.stop
    if stop.requests is not None:
        return warmup_requests(config, slots) + stop.requests
    if config.rate is not None:
        return warmup_requests(config, slots) + int(config.rate * (stop.duration_s or 0)) + 1
    return warmup_requests(config, slots) + config.pool_per_slot * slots


def open_loop_arrivals(config: BenchConfig, rate: float | None = None) -> int:
    """How many open-loop arrivals a level at ``rate`` (default: the configured rate) schedules."""
    stop = config.stop
    if stop.requests is not None:
        return stop.requests
    return max(1, int(((config.rate or 0) if rate is None else rate) * (stop.duration_s or 0)))

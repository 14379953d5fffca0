"""The levels one target runs, in order: the fixed ladder (each concurrency, or the one --rate), or the
rate search of --find-max-rate, whose next level depends on the verdict on the last one (bench/rate_search.py).

The runner asks for the next level, runs it (all its repeats), and hands the pooled result back to `judge`.
"""

from __future__ import annotations

from collections.abc import Iterator

from servelab.bench.config import BenchConfig
from servelab.bench.rate_search import MaxRate, RateSearch
from servelab.results.level_key import Level
from servelab.results.stats import LevelSummary


class Ladder:
    def __init__(self, config: BenchConfig) -> None:
        self.config = config
        search = config.search
        self.search = None if search is None else RateSearch(config.rate or 0.0, search)

    def __iter__(self) -> Iterator[Level]:
        if self.search is None:
            yield from self.config.levels
            return
        while (rate := self.search.next_rate()) is not None:
            yield Level.open(rate)

    def judge(self, result: LevelSummary) -> None:
        """The pooled result of the level just run (repeats together)."""
        rate = result.stats.level.rate_rps
        if self.search is not None and rate is not None and not result.partial:
            self.search.record(rate, result.stats.slo_attainment, result.valid)

    def answer(self) -> MaxRate | None:
        return None if self.search is None else self.search.answer()


def most_levels(config: BenchConfig) -> int:
    """The most levels a target can run: the ladder's length, or the search's probes."""
    return len(config.levels) if config.search is None else config.search.probes

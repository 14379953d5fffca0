"""The bounded rate search of --find-max-rate (bench/rate_search.py), driven by a known pass/fail rule."""

from __future__ import annotations

import pytest

from servelab.bench.rate_search import RateSearch, SearchSpec
from servelab.errors import ConfigError


def _search(start: float, spec: SearchSpec, capacity: float) -> RateSearch:
    """Probes pass (attainment 1) at or below ``capacity`` and fail (0.2) above it."""
    search = RateSearch(start, spec)
    while (rate := search.next_rate()) is not None:
        search.record(rate, 1.0 if rate <= capacity else 0.2)
    return search


def test_doubles_then_bisects_to_a_bracket_within_the_tolerance():
    search = _search(4.0, SearchSpec(cap_rps=100.0, probes=12), capacity=18.4)
    rates = [p.rate_rps for p in search.probes]
    assert rates[:4] == [4.0, 8.0, 16.0, 32.0]  # doubling until the first failure
    answer = search.answer()
    assert answer.outcome == "found" and answer.passing_rps <= 18.4 < answer.failing_rps
    assert answer.failing_rps <= answer.passing_rps * 1.05 and len(rates) <= 12
    assert len(set(rates)) == len(rates)  # never the same level twice
    assert "max rate with 90% of requests meeting ttft_ms<=60" in answer.line("ttft_ms<=60")
    assert answer.to_json()["lowest_failing"] == answer.failing_rps


def test_the_probe_budget_bounds_the_search():
    search = _search(1.0, SearchSpec(cap_rps=1000.0, probes=5), capacity=700.0)
    assert len(search.probes) == 5 and search.answer().outcome == "unbracketed"
    assert "raise --probes" in search.answer().line("e2e_ms<=1")


def test_no_pass_at_the_floor_and_a_pass_at_the_cap_are_no_answer():
    none = _search(2.0, SearchSpec(cap_rps=50.0), capacity=1.0).answer()
    assert none.outcome == "none_passed" and len(none.probes) == 1 and none.passing_rps is None
    assert "the lowest, 2 req/s, got 20%" in none.line("ttft_ms<=5")
    every = _search(2.0, SearchSpec(cap_rps=12.0), capacity=1e9).answer()
    assert every.outcome == "all_passed" and [p.rate_rps for p in every.probes] == [2.0, 4.0, 8.0, 12.0]
    assert "raise --max-rate" in every.line("ttft_ms<=5")


def test_attainment_target_and_bad_settings():
    search = RateSearch(1.0, SearchSpec(cap_rps=10.0, attainment=0.95))
    assert not search.record(1.0, 0.94).passed and search.record(2.0, 0.95).passed
    assert not search.record(3.0, None).passed  # nothing measured is no pass
    with pytest.raises(ConfigError, match="--probes"):
        SearchSpec(cap_rps=10.0, probes=1)
    with pytest.raises(ConfigError, match="--attainment"):
        SearchSpec(cap_rps=10.0, attainment=1.5)
    with pytest.raises(ConfigError, match="above --max-rate"):
        RateSearch(20.0, SearchSpec(cap_rps=10.0))

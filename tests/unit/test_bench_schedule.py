"""Schedules: ladders, absolute seeded arrivals, steady windows, stop rules, confidence intervals."""

from __future__ import annotations

import itertools
import math
import statistics

import pytest

from servelab.bench.schedule import (
    StopRule,
    arrival_offsets_ns,
    confidence_interval,
    parse_concurrency,
    steady_window,
)
from servelab.errors import ConfigError


def test_parse_concurrency():
    assert parse_concurrency("1,2,4,8,16") == (1, 2, 4, 8, 16)
    for bad in ("", "0", "a,b", "2,-1"):
        with pytest.raises(ConfigError, match="positive integers"):
            parse_concurrency(bad)


def test_arrivals_are_absolute_seeded_and_at_the_asked_rate():
    a = arrival_offsets_ns(10.0, 2000, seed=3)
    assert a == arrival_offsets_ns(10.0, 2000, seed=3)
    assert a != arrival_offsets_ns(10.0, 2000, seed=4)
    assert a[0] == 0 and all(x <= y for x, y in itertools.pairwise(a))
    gaps = [(y - x) / 1e9 for x, y in itertools.pairwise(a)]
    assert statistics.fmean(gaps) == pytest.approx(0.1, rel=0.06)
    assert statistics.stdev(gaps) == pytest.approx(0.1, rel=0.1)  # Poisson: sd = mean


def test_burstiness_changes_spread_not_rate_and_inf_is_even():
    smooth = arrival_offsets_ns(100.0, 3000, burstiness=16.0, seed=1)
    gaps = [(y - x) / 1e9 for x, y in itertools.pairwise(smooth)]
    assert statistics.fmean(gaps) == pytest.approx(0.01, rel=0.05)
    assert statistics.stdev(gaps) == pytest.approx(0.01 / 4, rel=0.15)  # sd = mean / sqrt(shape)
    even = arrival_offsets_ns(4.0, 5, burstiness=math.inf)
    assert even == [0, 250_000_000, 500_000_000, 750_000_000, 1_000_000_000]
    with pytest.raises(ConfigError):
        arrival_offsets_ns(0.0, 3)


def test_steady_window_from_all_slots_busy_to_first_slot_idle_for_good():
    # two slots: slot A runs [0,10],[10,20],[20,30]; slot B starts at 2 and ends at 25
    spans = [(0, 10), (10, 20), (20, 30), (2, 12), (12, 25)]
    w = steady_window(spans, 2)
    assert (w.t0_ns, w.t1_ns, w.steady) == (2, 25, True)


def test_steady_window_never_full_is_the_whole_level_and_marked():
    w = steady_window([(0, 10), (20, 30)], 2)
    assert (w.t0_ns, w.t1_ns, w.steady) == (0, 30, False)
    assert steady_window([], 4) is None


def test_stop_rule_requests_duration_and_error_budget():
    rule = StopRule(requests=3, max_errors=1)
    assert rule.may_start(2, 0, 0) and not rule.may_start(3, 0, 0)
    assert rule.may_start(0, 0, 1) and not rule.may_start(0, 0, 2)
    timed = StopRule(duration_s=1.0)
    assert timed.may_start(10_000, 999_999_999, 0) and not timed.may_start(0, 1_000_000_000, 0)
    with pytest.raises(ConfigError, match="--requests N or --duration S"):
        StopRule()


def test_confidence_interval_uses_t_distribution():
    mean, half = confidence_interval([10.0, 12.0, 14.0])
    assert mean == 12.0
    assert half == pytest.approx(4.303 * 2.0 / math.sqrt(3))
    assert confidence_interval([5.0]) is None

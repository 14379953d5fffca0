"""The ramp's schedules (bench/ramp.py): workers start at k·R/c; arrivals follow λ(t) = r·t/R, then r."""

from __future__ import annotations

import itertools
import math

import pytest

from servelab.bench.ramp import closed_start_offsets_ns, ramped_arrival_offsets_ns
from servelab.errors import ConfigError


def test_closed_loop_workers_start_evenly_over_the_ramp():
    assert closed_start_offsets_ns(4, 2.0) == [0, 500_000_000, 1_000_000_000, 1_500_000_000]
    assert closed_start_offsets_ns(1, 2.0) == [0]


def test_evenly_spaced_arrivals_follow_the_inverse_of_the_cumulative_intensity():
    # burstiness inf: operational times 0, 1, 2, ...; r = 10/s, R = 2 s → Λ(R) = 10 arrivals in the ramp
    offsets, ramp = ramped_arrival_offsets_ns(10.0, 5, 2.0, burstiness=math.inf)
    expected = [math.sqrt(2 * 2.0 * s / 10.0) for s in range(10)] + [
        2.0 + (s - 10) / 10.0 for s in range(10, 15)
    ]
    assert ramp == 10 and len(offsets) == 15
    assert offsets == [round(t * 1e9) for t in expected]
    assert all(b >= a for a, b in itertools.pairwise(offsets))


def test_poisson_ramp_is_seeded_and_ends_with_the_measured_count_at_the_full_rate():
    offsets, ramp = ramped_arrival_offsets_ns(50.0, 400, 4.0, seed=5)
    assert (offsets, ramp) == ramped_arrival_offsets_ns(50.0, 400, 4.0, seed=5)
    assert sum(1 for t in offsets if t < 4e9) == ramp and len(offsets) - ramp == 400
    assert 60 < ramp < 140  # about r·R/2 = 100
    after = offsets[ramp:]
    assert (len(after) - 1) / ((after[-1] - after[0]) / 1e9) == pytest.approx(50.0, rel=0.2)


def test_a_ramp_needs_positive_values():
    with pytest.raises(ConfigError, match="--ramp"):
        ramped_arrival_offsets_ns(1.0, 3, 0.0)

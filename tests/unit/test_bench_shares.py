"""How a level is split over workers (bench/shares.py) and how worker clocks map (bench/clock.py): exact."""

from __future__ import annotations

import itertools

import pytest

from servelab.bench.clock import SHARED_CLOCK, ClockEstimate, from_round_trips, level_bound
from servelab.bench.ramp import closed_start_offsets_ns
from servelab.bench.shares import split_closed, split_open


def test_closed_loop_splits_slots_and_requests_as_contiguous_serials() -> None:
    shares = split_closed(5, 2, warmup=5, requests=32, duration_s=None)
    assert [s.slots for s in shares] == [3, 2]
    assert [s.warmup for s in shares] == [(0, 2, 4), (1, 3)]
    # 32 × 3/5 = 19.2 and 32 × 2/5 = 12.8: the larger remainder gets the one left over
    assert [list(s.serials()) for s in shares] == [list(range(5, 24)), list(range(24, 37))]


def test_every_measured_serial_is_sent_once_whatever_the_split() -> None:
    for c in (1, 2, 3, 7, 16):
        for n in (1, 2, 3, 4, 8):
            shares = split_closed(c, n, warmup=c, requests=50, duration_s=None)
            measured = sorted(x for s in shares for x in s.serials())
            warm = sorted(x for s in shares for x in s.warmup)
            assert measured == list(range(c, c + 50)) and warm == list(range(c))
            assert sum(s.slots for s in shares) == c


def test_a_worker_without_a_slot_is_idle() -> None:
    shares = split_closed(1, 3, warmup=1, requests=8, duration_s=None)
    assert [s.idle for s in shares] == [False, True, True]
    assert list(shares[0].serials()) == list(range(1, 9))


def test_a_duration_level_strides_serials_over_the_active_workers() -> None:
    shares = split_closed(3, 2, warmup=0, requests=None, duration_s=2.0)
    first = [list(zip(range(4), s.serials(), strict=False)) for s in shares]
    assert [[x for _, x in f] for f in first] == [[0, 2, 4, 6], [1, 3, 5, 7]]
    assert all(s.count is None and s.duration_s == 2.0 for s in shares)


def test_open_loop_deals_one_schedule_round_robin_with_its_offsets() -> None:
    offsets = [0, 10, 25, 31, 40]
    shares = split_open(offsets, 2, warmup=1)
    assert shares[0].arrivals == ((1, 0, "measure"), (3, 25, "measure"), (5, 40, "measure"))
    assert shares[1].arrivals == ((2, 10, "measure"), (4, 31, "measure"))
    assert [s.warmup for s in shares] == [(0,), ()]
    assert all(s.open_loop for s in shares)


def test_a_closed_ramp_starts_the_levels_users_as_one_process_would_dealt_over_the_workers() -> None:
    for c, n in ((5, 2), (4, 3), (2, 4), (16, 3)):
        shares = split_closed(c, n, warmup=0, requests=20, duration_s=None, ramp_s=0.4)
        assert [len(s.starts_ns) for s in shares] == [s.slots for s in shares]
        assert sorted(x for s in shares for x in s.starts_ns) == closed_start_offsets_ns(c, 0.4)
        assert {s.ramp_ns for s in shares if s.slots} == {400_000_000}
    shares = split_closed(5, 2, warmup=0, requests=20, duration_s=None, ramp_s=1.0)
    assert [s.starts_ns for s in shares] == [(0, 400_000_000, 800_000_000), (200_000_000, 600_000_000)]


def test_ramp_serials_follow_the_measured_ones_and_never_meet_across_workers() -> None:
    shares = split_closed(5, 3, warmup=3, requests=20, duration_s=None, ramp_s=1.0)
    measured = sorted(x for s in shares for x in s.serials())
    assert measured == list(range(3, 23))  # the same measured serials as without a ramp
    ramp = [list(itertools.islice(s.ramp_serials(s.serials()), 4)) for s in shares]
    assert ramp == [[23, 26, 29, 32], [24, 27, 30, 33], [25, 28, 31, 34]]


def test_a_duration_ramp_takes_from_the_one_stream_of_serials() -> None:
    (share,) = split_closed(2, 1, warmup=0, requests=None, duration_s=1.0, ramp_s=1.0)
    measured = share.serials()
    ramp = share.ramp_serials(measured)
    assert [next(ramp), next(measured), next(ramp), next(measured)] == [0, 1, 2, 3]


def test_a_worker_with_slots_but_no_measured_request_still_ramps() -> None:
    shares = split_closed(4, 2, warmup=0, requests=1, duration_s=None, ramp_s=1.0)
    assert [s.count for s in shares] == [1, 0] and not any(s.idle for s in shares)
    assert split_closed(4, 2, warmup=0, requests=1, duration_s=None)[
        1
    ].idle  # without a ramp: nothing to send


def test_an_open_ramp_flags_the_first_arrivals_of_the_one_schedule() -> None:
    shares = split_open([0, 10, 25, 31, 40], 2, warmup=0, ramp_count=3)
    assert shares[0].arrivals == ((0, 0, "ramp"), (2, 25, "ramp"), (4, 40, "measure"))
    assert shares[1].arrivals == ((1, 10, "ramp"), (3, 31, "measure"))


def test_clock_offset_is_the_midpoint_of_the_shortest_round_trip() -> None:
    # worker clock = coordinator clock - 1_000; trips (c0, w, c1)
    trips = [(100, -800, 400), (500, -450, 560), (1000, 60, 1300)]
    est = from_round_trips(trips)
    assert est == ClockEstimate(offset_ns=980, bound_ns=30)
    assert est.to_coordinator(-450) == 530 and est.to_worker(530) == -450
    assert abs(est.offset_ns - 1000) <= est.bound_ns  # the true offset lies within the bound


def test_level_bound_counts_drift_between_the_estimates() -> None:
    before, after = ClockEstimate(1000, 30), ClockEstimate(1100, 20)
    assert level_bound(before, after) == 120  # max(30, 20 + 100)
    assert level_bound(before, ClockEstimate(1000, 50)) == 50
    assert level_bound(SHARED_CLOCK, SHARED_CLOCK) == 0


def test_a_round_trip_that_goes_backwards_is_refused() -> None:
    with pytest.raises(ValueError):
        from_round_trips([(10, 0, 5)])
    with pytest.raises(ValueError):
        from_round_trips([])

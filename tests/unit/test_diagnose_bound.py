"""Bandwidth-bound or compute/power-bound: exact numbers."""

from __future__ import annotations

import pytest

from servelab.diagnose.bound import analyse_bound


def rows(*watts: float) -> list[dict]:
    return [{"t_ns": i, "gpu": 0, "power_w": w} for i, w in enumerate(watts)]


def test_field_report_case_is_bandwidth_bound():
    # 15 GB read per token at 60 tok/s on a 1008 GB/s card, serving at 150 W against a 450 W burn
    result = analyse_bound(
        rows(140, 160), burn_power_w=450, bytes_per_token=15e9, tok_s=60, bandwidth_gb_s=1008
    )
    assert result.verdict == "bandwidth-bound"
    assert result.achieved_bandwidth_gb_s == pytest.approx(900.0)
    assert result.bandwidth_fraction == pytest.approx(900 / 1008)
    assert result.serving_power_w == pytest.approx(150.0)
    assert result.power_fraction == pytest.approx(1 / 3)
    assert (
        "900 GB/s of the card's 1008 GB/s (89%)" in result.why
        and "150 W of the burn's 450 W (33%)" in result.why
    )


def test_near_burn_power_is_compute_bound_even_with_high_bandwidth():
    result = analyse_bound(
        rows(400, 420), burn_power_w=450, bytes_per_token=15e9, tok_s=60, bandwidth_gb_s=1008
    )
    assert result.verdict == "compute/power-bound" and result.power_fraction == pytest.approx(410 / 450)


def test_low_bandwidth_and_low_power_is_neither():
    result = analyse_bound(rows(100), burn_power_w=450, bytes_per_token=15e9, tok_s=20, bandwidth_gb_s=1008)
    assert result.verdict == "neither" and result.bandwidth_fraction == pytest.approx(300 / 1008)


def test_missing_numbers_are_undetermined_not_an_error():
    result = analyse_bound([], burn_power_w=None, bytes_per_token=None, tok_s=50, bandwidth_gb_s=1008)
    assert result.verdict == "undetermined"
    assert result.achieved_bandwidth_gb_s is None and result.serving_power_w is None
    only_bandwidth = analyse_bound([], burn_power_w=None, bytes_per_token=15e9, tok_s=60, bandwidth_gb_s=1008)
    assert only_bandwidth.verdict == "bandwidth-bound" and only_bandwidth.power_fraction is None

"""Verdicts: the field report's cases and the tuning advice."""

from __future__ import annotations

import pytest

from servelab.speculative.sources import from_numbers
from servelab.speculative.verdict import DEFAULT_DRAFT_COST, decide


def test_a_few_percent_acceptance_with_four_draft_tokens_rolls_back():
    # Field report: EAGLE/MTP with 4 draft tokens, acceptance of a few percent, accept length barely above 1.
    result = decide(from_numbers(4, accept_rate=0.03))
    assert result.verdict == "rollback"
    assert result.predicted_speedup < 1.0
    assert result.draft_cost == DEFAULT_DRAFT_COST
    assert "turn speculation off" in result.why


def test_the_same_acceptance_rolls_back_even_with_a_cheap_head():
    # Theory still promises a few percent at 1 draft token (1.09x at c = 0.02), below the 10% a rescue needs.
    for cost in (0.02, 0.05):
        assert decide(from_numbers(4, accept_length=1.12), draft_cost=cost).verdict == "rollback"


@pytest.mark.parametrize(
    "acceptance", [{"accept_rate": 0.46}, {"accept_rate": 46.0}, {"accept_length": 1.81}]
)
def test_about_46_percent_acceptance_with_a_cheap_draft_keeps(acceptance):
    # NInfer reached about 46% acceptance; read as a token rate (E = 2.84) or as alpha (E = 1.81), both pay.
    result = decide(from_numbers(4, **acceptance), draft_cost=0.05)
    assert result.verdict == "keep"
    assert result.predicted_speedup > 1.4
    assert result.measured_speedup is None


def test_too_many_draft_tokens_are_tuned_down_and_the_gamma_is_named():
    result = decide(from_numbers(8, accept_rate=0.2), draft_cost=0.05)
    assert result.verdict == "tune"
    assert result.best_draft_tokens < 8
    assert f"use {result.best_draft_tokens}" in result.why


def test_measured_speedup_below_one_overrides_a_good_prediction():
    result = decide(from_numbers(4, accept_rate=0.46), draft_cost=0.05, measured_speedup=0.9)
    assert result.predicted_speedup > 2
    assert result.measured_speedup == 0.9
    assert result.verdict == "rollback"
    assert "measured speedup 0.90x" in result.why


def test_a_losing_setup_with_a_good_shorter_draft_is_tuned():
    # alpha 0.5, c = 0.3: 8 drafts give 1.996 / 3.4 = 0.59x; 1 draft gives 1.5 / 1.3 = 1.15x.
    result = decide(from_numbers(8, accept_length=1.99609375), draft_cost=0.3)
    assert result.alpha == pytest.approx(0.5)
    assert result.predicted_speedup == pytest.approx(1.99609375 / 3.4)
    assert (result.verdict, result.best_draft_tokens) == ("tune", 1)
    assert result.best_predicted_speedup == pytest.approx(1.5 / 1.3)


def test_measured_gain_keeps():
    assert decide(from_numbers(4, accept_rate=0.46), draft_cost=0.05, measured_speedup=1.6).verdict == "keep"

"""Speculative-decoding theory: Eq. 1, its inverse, Theorem 3.8 and the best draft length."""

from __future__ import annotations

import pytest

from servelab.speculative.theory import (
    accept_length_from_rate,
    alpha_from_accept_length,
    best_draft_tokens,
    expected_tokens_per_step,
    predicted_speedup,
)


@pytest.mark.parametrize("gamma", [1, 2, 3, 4, 5, 8, 15])
@pytest.mark.parametrize("alpha", [0.0, 0.01, 0.05, 0.2, 0.46, 0.6, 0.8, 0.95, 0.999])
def test_alpha_is_recovered_exactly_from_the_accept_length(alpha, gamma):
    length = expected_tokens_per_step(alpha, gamma)
    assert alpha_from_accept_length(length, gamma) == pytest.approx(alpha, abs=1e-12)


def test_expected_tokens_by_hand():
    # 1 + a + a^2 + a^3 + a^4 for a = 0.5
    assert expected_tokens_per_step(0.5, 4) == pytest.approx(1.9375)
    assert expected_tokens_per_step(0.0, 4) == 1.0
    assert expected_tokens_per_step(1.0, 4) == 5.0


def test_accept_length_out_of_range_is_clamped():
    assert alpha_from_accept_length(0.9, 4) == 0.0
    assert alpha_from_accept_length(5.0, 4) == 1.0


def test_rate_and_length_conventions_agree():
    # vLLM log from ik_llama.cpp PR #1669: 2 drafts, "Mean acceptance length: 2.62 ... Avg Draft acceptance rate: 81.2%"
    assert accept_length_from_rate(0.8125, 2) == pytest.approx(2.625)


def test_speedup_is_theorem_3_8():
    # S = (1 - a^(g+1)) / ((1 - a)(g c + 1)) with a = 0.8, g = 4, c = 0.05 -> 3.3616 / 1.2
    assert predicted_speedup(0.8, 4, 0.05) == pytest.approx(3.3616 / 1.2)
    assert predicted_speedup(0.8, 4, 0.05, verify_cost=1.2) == pytest.approx(3.3616 / 1.4)


def test_best_draft_tokens_grows_with_alpha_and_shrinks_with_cost():
    low, _ = best_draft_tokens(0.3, 0.05)
    high, _ = best_draft_tokens(0.9, 0.05)
    costly, _ = best_draft_tokens(0.9, 0.5)
    assert low < high and costly < high
    gamma, speedup = best_draft_tokens(0.9, 0.05)
    assert speedup == pytest.approx(max(predicted_speedup(0.9, g, 0.05) for g in range(1, 17)))
    assert predicted_speedup(0.9, gamma, 0.05) == speedup


@pytest.mark.parametrize(
    ("call", "args"), [(expected_tokens_per_step, (1.5, 4)), (expected_tokens_per_step, (0.5, 0))]
)
def test_bad_inputs_raise(call, args):
    with pytest.raises(ValueError):
        call(*args)

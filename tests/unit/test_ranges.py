"""servelab/ranges.py: the one rule per kind of number, and the messages it gives."""

from __future__ import annotations

import math

import pytest

from servelab.errors import ConfigError
from servelab.ranges import count, number


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, -1.0, 10.5, "3", None, True])
def test_number_refuses_what_is_not_a_number_in_range(bad):
    with pytest.raises(ConfigError) as caught:
        number(bad, "--x", 0, 10, "s")
    assert str(caught.value).startswith("--x must be a number from 0 to 10 s, got ")


def test_number_bounds_are_inclusive_unless_above_and_inf_only_when_allowed():
    assert number(0, "--x", 0, 10) == 0.0 and number(10, "--x", 0, 10) == 10.0
    with pytest.raises(ConfigError, match=r"^--x must be a number above 0 and at most 10, got 0$"):
        number(0, "--x", 0, 10, above=True)
    assert number(math.inf, "--x", 0, 10, inf_allowed=True) == math.inf
    with pytest.raises(ConfigError):
        number(math.nan, "--x", 0, 10, inf_allowed=True)


@pytest.mark.parametrize("bad", [0, 1_000_001, 2.5, math.nan, "8", False, None])
def test_count_refuses_what_is_not_a_whole_number_in_range(bad):
    with pytest.raises(ConfigError) as caught:
        count(bad, "--n", 1, 1_000_000, "requests")
    assert str(caught.value).startswith("--n must be a whole number from 1 to 1,000,000 requests, got ")


def test_count_takes_a_whole_float_as_an_int():
    value = count(8.0, "--n", 1, 10)
    assert value == 8 and isinstance(value, int)

"""Range checks for numbers from the command line and experiment files: one rule per kind of number.

Every numeric option passes through ``number`` (a real number) or ``count`` (a whole number) where its
config is built: NaN, infinities (unless the option gives inf a meaning), booleans, strings and values
outside the option's range become one ConfigError line (exit 2) naming the option, the range and what was
given, before anything runs. The bounds are generous and finite, so no option can ask for a run that
would never end or a buffer that would never fit.
"""

from __future__ import annotations

import math

from servelab.errors import ConfigError


def _shown(bound: float) -> str:
    return f"{int(bound):,}" if float(bound).is_integer() else f"{bound:g}"


def _range_text(low: float, high: float, unit: str, *, above: bool) -> str:
    span = (
        f"above {_shown(low)} and at most {_shown(high)}"
        if above
        else f"from {_shown(low)} to {_shown(high)}"
    )
    return span + (f" {unit}" if unit else "")


def _given(value: object) -> str:
    return f"{value!r}" if isinstance(value, str) else f"{value}"


def number(
    value: object,
    option: str,
    low: float,
    high: float,
    unit: str = "",
    *,
    above: bool = False,
    inf_allowed: bool = False,
) -> float:
    """``value`` as a float in [low, high] (``above``: low itself excluded); ConfigError otherwise."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        real = float(value)
        if inf_allowed and real == math.inf:
            return real
        if (low < real if above else low <= real) and real <= high:  # False for NaN
            return real
    raise ConfigError(
        f"{option} must be a number {_range_text(low, high, unit, above=above)}, got {_given(value)}"
    )


def count(value: object, option: str, low: int, high: int, unit: str = "") -> int:
    """``value`` as an int in [low, high] (a float only when whole, e.g. YAML's ``8.0``); ConfigError otherwise."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and low <= value <= high:
        return value
    raise ConfigError(
        f"{option} must be a whole number {_range_text(low, high, unit, above=False)}, got {_given(value)}"
    )

"""Values from a server's JSON, checked at the edge: each engine's endpoints.py passes every field it keeps
through one of these, so a dict or a list where a string or a number belongs becomes "not reported" (None)
instead of reaching a comparison, a table title or the store (issue 26.4)."""

from __future__ import annotations

import math
from typing import Any


def text(value: Any) -> str | None:
    """A string as sent, a number as its text; anything else (a dict, a list, a bool, null) None."""
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return None


def count(value: Any) -> int | None:
    """A whole number above zero (a token count, a slot count, a TP size), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def number(value: Any) -> float | int | None:
    """A finite number, else None."""
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return value
    return None


def flag(value: Any) -> bool | None:
    """A JSON true or false, else None."""
    return value if isinstance(value, bool) else None


def scalar(value: Any) -> str | int | float | bool | None:
    """A string, number or bool as sent (a setting shown as it was reported); a dict or a list None."""
    return value if isinstance(value, str | int | float | bool) else None

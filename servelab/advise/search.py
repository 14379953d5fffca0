"""The highest load that meets the SLOs, found by bisection (pure: `passes` is the only way it learns anything).

Loads are users per replica (closed loop, whole numbers) or requests/s per replica (open loop). The search
assumes the tail grows with the load (more users never make p99 shorter), probes the cap first (a demand that
is met needs no more), then the floor, then bisects between the highest passing and the lowest failing load:
by halves for users, geometrically for rates until the bracket is within `tolerance`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

RATE_TOLERANCE = 0.05  # the final bracket [passing, failing] is this narrow, relatively


@dataclass(frozen=True)
class Capacity:
    """The search's answer: `load` the highest that passed (None: not even `floor`), `failing` the lowest that
    failed (None: the cap passed), and how many loads were probed."""

    load: float | None
    failing: float | None
    probes: int


def highest_passing(
    floor: float,
    cap: float,
    passes: Callable[[float], bool],
    *,
    whole: bool,
    tolerance: float = RATE_TOLERANCE,
) -> Capacity:
    """The highest load in [floor, cap] for which `passes` holds, under the monotone assumption above."""
    probed = 0

    def check(load: float) -> bool:
        nonlocal probed
        probed += 1
        return passes(load)

    if check(cap):
        return Capacity(cap, None, probed)
    if floor >= cap or not check(floor):
        return Capacity(None, floor if floor < cap else cap, probed)
    good, bad = floor, cap
    while _apart(good, bad, whole, tolerance):
        middle = (good + bad) // 2 if whole else math.sqrt(good * bad)
        if check(middle):
            good = middle
        else:
            bad = middle
    return Capacity(good, bad, probed)


def _apart(good: float, bad: float, whole: bool, tolerance: float) -> bool:
    return bad - good > 1 if whole else bad > good * (1 + tolerance)

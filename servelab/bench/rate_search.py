"""`--find-max-rate`: the highest open-loop rate whose requests meet the SLOs, found with a bounded search (pure).

A probe is one open-loop level at a rate; it passes when its SLO attainment (good requests / measured
requests, errors counted as not good: `summary.summarize_level`) is at least the asked fraction. The search
probes the first rate (`--rate`, the floor), doubles while probes pass (never above the cap, `--max-rate`),
then bisects the bracket [highest passing, lowest failing] geometrically until the lowest failing rate is
within `tolerance` of the highest passing one, or the probes (`--probes`) are spent. The answer is the
highest passing rate with its bracket. No pass at the floor, or a pass at the cap, is no answer: the outcome
says which, and the command reports it as an error (the probes are stored either way).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from servelab.errors import ConfigError
from servelab.ranges import count, number

DEFAULT_PROBES = 12
MAX_PROBES = 100
DEFAULT_ATTAINMENT = 0.9  # DistServe's goodput: the rate at which 90% of requests meet their SLOs
DEFAULT_TOLERANCE = 0.05
DEFAULT_CAP_FACTOR = 100.0  # --max-rate when not given: 100 × the first rate


@dataclass(frozen=True)
class SearchSpec:
    cap_rps: float
    probes: int = DEFAULT_PROBES
    attainment: float = DEFAULT_ATTAINMENT
    tolerance: float = DEFAULT_TOLERANCE

    def __post_init__(self) -> None:
        number(self.cap_rps, "--max-rate", 0, 1_000_000.0, "requests/s", above=True)
        count(self.probes, "--probes", 2, MAX_PROBES, "levels")
        number(self.attainment, "--attainment", 0, 1, "(fraction of requests meeting the SLOs)", above=True)
        number(self.tolerance, "--rate-tolerance", 0, 1, "(relative width of the final bracket)", above=True)


@dataclass(frozen=True)
class RateProbe:
    rate_rps: float
    attainment: float | None  # None: no request was measured
    passed: bool
    valid: bool = True  # the client kept up (bench/monitor.py); an invalid probe is judged all the same

    def to_json(self) -> dict[str, Any]:
        return {
            "rate": self.rate_rps,
            "slo_attainment": self.attainment,
            "passed": self.passed,
            "valid": self.valid,
        }


@dataclass
class RateSearch:
    """The search's state: ask `next_rate`, run that level, tell `record` what it attained."""

    start_rps: float
    spec: SearchSpec
    probes: list[RateProbe] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.start_rps > self.spec.cap_rps:
            raise ConfigError(
                f"--rate {self.start_rps:g} (the first probe) is above --max-rate {self.spec.cap_rps:g}"
            )

    def next_rate(self) -> float | None:
        """The next rate to probe, or None when the search is over."""
        if not self.probes:
            return self.start_rps
        if len(self.probes) >= self.spec.probes:
            return None
        passing, failing = self._bracket()
        if passing is None:
            return None  # the floor failed: no rate to go down to
        if failing is None:
            return None if passing >= self.spec.cap_rps else min(self.spec.cap_rps, _round(passing * 2))
        if failing <= passing * (1 + self.spec.tolerance):
            return None
        middle = _round(math.sqrt(passing * failing))
        return middle if passing < middle < failing else None

    def record(self, rate_rps: float, attainment: float | None, valid: bool = True) -> RateProbe:
        passed = attainment is not None and attainment >= self.spec.attainment
        probe = RateProbe(rate_rps, attainment, passed, valid)
        self.probes.append(probe)
        return probe

    def _bracket(self) -> tuple[float | None, float | None]:
        """(highest passing rate below the lowest failing one, lowest failing rate)."""
        failing = min((p.rate_rps for p in self.probes if not p.passed), default=None)
        passing = max(
            (p.rate_rps for p in self.probes if p.passed and (failing is None or p.rate_rps < failing)),
            default=None,
        )
        return passing, failing

    def answer(self) -> MaxRate:
        passing, failing = self._bracket()
        if passing is None:
            outcome = "none_passed"
        elif failing is None:
            outcome = "all_passed" if passing >= self.spec.cap_rps else "unbracketed"
        else:
            outcome = "found"
        return MaxRate(outcome, passing, failing, tuple(self.probes), self.spec, self.start_rps)


@dataclass(frozen=True)
class MaxRate:
    """The search's result: ``outcome`` found (a bracket), none_passed (the floor failed), all_passed (the
    cap passed) or unbracketed (the probes ran out while every one passed, below the cap)."""

    outcome: str
    passing_rps: float | None  # the answer: the highest rate that met the SLOs
    failing_rps: float | None  # the lowest rate that did not
    probes: tuple[RateProbe, ...]
    spec: SearchSpec
    start_rps: float

    def to_json(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome,
            "max_rate": self.passing_rps,
            "highest_passing": self.passing_rps,
            "lowest_failing": self.failing_rps,
            "attainment_target": self.spec.attainment,
            "rate_floor": self.start_rps,
            "rate_cap": self.spec.cap_rps,
            "probes_allowed": self.spec.probes,
            "tolerance": self.spec.tolerance,
            "probes": [p.to_json() for p in self.probes],
        }

    def line(self, slo_text: str) -> str:
        """One line for the person: the answer and its bracket, or why there is none."""
        target = f"{self.spec.attainment:.0%} of requests meeting {slo_text}"
        if self.outcome == "found":
            return (
                f"max rate with {target}: {self.passing_rps:g} req/s (highest passing {self.passing_rps:g}, "
                f"lowest failing {self.failing_rps:g}; {len(self.probes)} probes)"
            )
        if self.outcome == "none_passed":
            low = min(self.probes, key=lambda p: p.rate_rps)
            got = "no request measured" if low.attainment is None else f"{low.attainment:.0%}"
            return (
                f"no rate tried had {target}: the lowest, {low.rate_rps:g} req/s, got {got}; "
                "lower --rate (the first probe) or loosen --slo"
            )
        if self.outcome == "all_passed":
            return (
                f"every rate tried up to the cap had {target} ({self.spec.cap_rps:g} req/s passed); "
                "raise --max-rate"
            )
        return (
            f"every rate tried had {target} (up to {self.passing_rps:g} req/s) and the {len(self.probes)} "
            "probes ran out below --max-rate; raise --probes or --rate"
        )


def _round(rate: float) -> float:
    """Three significant digits: rates that read well as level labels (r=18.2)."""
    return float(f"{rate:.3g}")

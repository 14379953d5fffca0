"""`Level`: one rung of the ladder, closed loop at a concurrency or open loop at a request rate.

Its text form ``c=4`` / ``r=2.5`` exists only at the edges (request records, the store, JSON):
`Level.parse` reads it, `Level.label` writes it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Level:
    concurrency: int | None = None  # closed loop: this many requests in flight
    rate_rps: float | None = None  # open loop: requests sent per second on a schedule

    def __post_init__(self) -> None:
        if (self.concurrency is None) == (self.rate_rps is None):
            raise ValueError("a level has either a concurrency or a request rate, not both or neither")
        if self.concurrency is not None and self.concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, not {self.concurrency}")
        if self.rate_rps is not None and not (math.isfinite(self.rate_rps) and self.rate_rps > 0):
            raise ValueError(f"request rate must be a positive number, not {self.rate_rps}")

    @classmethod
    def closed(cls, concurrency: int) -> Level:
        return cls(concurrency=concurrency)

    @classmethod
    def open(cls, rate_rps: float) -> Level:
        return cls(rate_rps=float(rate_rps))

    @classmethod
    def parse(cls, text: str) -> Level:
        """``"c=4"`` → closed(4), ``"r=2.5"`` → open(2.5); ValueError for anything else."""
        kind, _, value = text.partition("=")
        try:
            if kind == "c" and value.isdigit():
                return cls.closed(int(value))
            if kind == "r":
                return cls.open(float(value))
        except ValueError:
            pass
        raise ValueError(f"not a level: {text!r} (expected c=N or r=RATE)")

    @property
    def label(self) -> str:
        return f"c={self.concurrency}" if self.concurrency is not None else f"r={self.rate_rps:g}"

    @property
    def sort_key(self) -> tuple[bool, float]:
        """Closed-loop levels first, each kind in ascending order."""
        return (self.concurrency is None, float(self.concurrency or self.rate_rps or 0.0))

    def __str__(self) -> str:
        return self.label

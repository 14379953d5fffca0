"""A row's replay reduced, once, to what the step model's parameters multiply.

The step model is linear in its parameters once each pass's side of its max (memory or compute) is known
(predict/stepmodel.py). So a replay (`harness.pass_log`, run once per row at the priors) is kept as:

- its passes in *groups*: passes whose five times at the card's peaks (weight bytes, KV and state bytes, decode
  and prompt matmul FLOPs, attention FLOPs) each agree within a factor e^GROUP_EPS fall in one group, and a group
  takes one side.
  Under any non-negative parameters the memory / compute ratio of two passes of a group differs by at most
  e^(2 GROUP_EPS), so a group's side is every pass's side except where the two sides are within 2% of each
  other, and there a pass's time is off by at most that;
- for each figure the rows measured: the figure's share of each group's times (`sided`), its share of the
  side-free terms (layers x passes for the launch floor, all-reduce seconds, steps for the host time, tokens), its
  idle time, and its count or divisor.

A figure under a model is then `(sided · side mask) · values + fixed · values + idle`: a fold of the
cross-validation prices every row by a few array operations, never by replaying it again.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from servelab.predict.corpus.harness import PassLog, Setup
from servelab.predict.stepmodel import ATTENTION_UNIT, StepModel

# the parameters' roles (Regime.names()); the first seven multiply a side of a pass, the last four do not
ROLES = (
    "weights",
    "memory",
    "kv",
    "compute",
    "backend",
    "attention",
    "decode",
    "launch",
    "allreduce",
    "host",
    "token",
)
SIDED_ROLES = 7
# a pass's times at the peaks (`peak_seconds`): weights, KV + state, decode matmul, attention, prompt matmul
COLUMNS = 5
# which of a group's times each sided role multiplies, and on which side (True: memory)
ROLE_COLUMN = (0, 0, 1, 4, 4, 3, 2)
ROLE_MEMORY = (True, True, True, False, False, False, False)
GROUP_EPS = 0.01


@dataclass(frozen=True)
class RecordedFigure:
    name: str
    sided: (
        np.ndarray
    )  # (G, 4): the figure's share of each group's weight, KV, matmul, attention seconds at peak
    fixed: np.ndarray  # (4,): launch (layers x passes), all-reduce seconds, steps (host), tokens
    idle_s: float
    count: float  # a rate's numerator; 0 for a time
    divisor: float

    def of_seconds(self, seconds: float) -> float:
        if self.count:
            return self.count / seconds if seconds > 0 else math.inf
        return seconds / self.divisor * 1e3

    def seconds_of(self, measured: float) -> float:
        """The measured figure as seconds of steps: a time as is, a rate as its count over the rate."""
        return self.count / measured if self.count else measured / 1e3 * self.divisor


@dataclass(frozen=True)
class Recorded:
    """One row's replay as the step model prices it (module docstring)."""

    setup: Setup
    names: tuple[str, ...]  # the parameter of each role, ROLES order
    groups: np.ndarray  # (G, COLUMNS) seconds at the peaks (`peak_seconds`)
    figures: dict[str, RecordedFigure]
    today: dict[str, float]  # the figures the plan alone gives (no step model), on the same replay

    def memory_side(self, model: StepModel) -> np.ndarray:
        """Per group: True where memory is the longer side under `model`."""
        return memory_side(self.groups, np.array([[model.value(n) for n in self.names]]))

    def coefficients(self, figure: str, memory: np.ndarray) -> np.ndarray:
        """(ROLES,) the seconds each role's parameter multiplies in `figure`, with the groups' sides `memory`."""
        f = self.figures[figure]
        out = np.empty(len(ROLES))
        for j in range(SIDED_ROLES):
            mask = memory if ROLE_MEMORY[j] else ~memory
            out[j] = f.sided[mask, ROLE_COLUMN[j]].sum()
        out[SIDED_ROLES:] = f.fixed
        return out

    def predict(self, figure: str, model: StepModel) -> float:
        """`figure` under `model`: the sides chosen by it, the replay's steps held."""
        coef = self.coefficients(figure, self.memory_side(model))
        seconds = float(coef @ np.array([model.value(n) for n in self.names])) + self.figures[figure].idle_s
        return self.figures[figure].of_seconds(seconds)


def memory_side(groups: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Per group: True where memory is the longer side, `values` (one row of ROLES values, or one per group)."""
    memory = np.zeros(len(groups))
    compute = np.zeros(len(groups))
    for j in range(SIDED_ROLES):
        part = groups[:, ROLE_COLUMN[j]] * values[:, j]
        if ROLE_MEMORY[j]:
            memory += part
        else:
            compute += part
    return memory >= compute


def peak_seconds(s: Setup, t: PassLog) -> np.ndarray:
    """(P, COLUMNS) each pass's weight and KV bytes over the card's bandwidth, decode and prompt matmul FLOPs over
    its math units' peak, attention FLOPs over its 16-bit peak."""
    bw = s.gpu.bandwidth_bytes_s
    unit = s.gpu.tensor_flops(s.regime.unit)
    p = t.passes
    return np.column_stack(
        [
            p[:, 0] / bw,
            p[:, 1] / bw,
            (p[:, 2] - p[:, 5]) / unit,
            p[:, 3] / s.gpu.tensor_flops(ATTENTION_UNIT),
            p[:, 5] / unit,
        ]
    )


def _group_of(seconds: np.ndarray) -> tuple[np.ndarray, int]:
    """Each pass's group (module docstring) and the number of groups."""
    if not len(seconds):
        return np.zeros(0, dtype=int), 0
    with np.errstate(divide="ignore"):
        logs = np.where(seconds > 0, np.log(np.where(seconds > 0, seconds, 1.0)) / GROUP_EPS, -1e9)
    keys = np.round(logs).astype(np.int64)
    _, index = np.unique(keys, axis=0, return_inverse=True)
    index = index.reshape(-1)
    return index, int(index.max()) + 1


def record(s: Setup, t: PassLog, today: dict[str, float] | None = None) -> Recorded:
    """The row's replay `t` reduced to its groups and figures."""
    seconds = peak_seconds(s, t)
    group, count = _group_of(seconds)
    groups = np.zeros((count, COLUMNS))
    np.add.at(groups, group, seconds)
    figures = {}
    for name, f in t.figures.items():
        per_step = np.zeros(t.steps)
        np.add.at(per_step, f.steps, f.shares)
        per_pass = per_step[t.pass_step] if len(t.pass_step) else np.zeros(0)
        sided = np.zeros((count, COLUMNS))
        np.add.at(sided, group, seconds * per_pass[:, None])
        fixed = np.array(
            [
                s.layers * per_pass.sum(),
                float(per_pass @ t.passes[:, 4]) if len(per_pass) else 0.0,
                float(f.shares.sum()),
                float(f.shares @ t.step_tokens[f.steps]),
            ]
        )
        figures[name] = RecordedFigure(name, sided, fixed, f.idle_s, f.count, f.divisor)
    names = tuple(s.regime.names()[r] for r in ROLES)
    return Recorded(s, names, groups, figures, dict(today or {}))

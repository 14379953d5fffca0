"""Fit the step model's parameters to corpus rows: one procedure, the sibling of `calibrate`'s.

Each row is replayed once (`harness.pass_log`, priced by the priors, so the replay knows nothing of any measurement)
and reduced to what the parameters multiply (`recorded.record`). With each pass on the memory or the compute
side of its max, a step's time is linear in the parameters (predict/stepmodel.py), so every figure is
`a · θ + idle`. The fit solves

    min Σ_rows w_row ((a · θ + idle - y) / y)^2  +  λ^2 Σ_params ((θ_i - prior_i) / scale_i)^2,   θ >= 0

by non-negative least squares (Lawson and Hanson's active-set method, `nnls` below): relative error, each source's figures weighted 1/sqrt(count)
in total (a source with many rows does not drown the rest), and a pull of weight λ towards each parameter's
sourced prior, so a parameter the rows barely touch stays near what servelab knew without them (the
regularisation `calibrate` does by keeping a figure the data does not touch). The sides are re-chosen with the
new parameters and the system solved again until they stop changing; rows the fit misses by more than TRIM sit
out the later rounds (a row the model cannot explain does not bend the rest), as in calibrate.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from servelab.predict.corpus.recorded import (
    COLUMNS,
    ROLE_COLUMN,
    ROLE_MEMORY,
    ROLES,
    SIDED_ROLES,
    Recorded,
)
from servelab.predict.stepmodel import StepModel, prior

LAMBDA = 0.1  # the prior's pull, in units of one row's relative error
TRIM = 1.0  # rows missed by more than this (relative) sit out later rounds
ROUNDS = 12


@dataclass(frozen=True)
class MeasuredFigure:
    """One measured figure of one row, with the recorded replay that prices it."""

    recorded: Recorded
    figure: str
    measured: float

    @property
    def y_s(self) -> float:
        return self.recorded.figures[self.figure].seconds_of(self.measured)


def measured_figures(recorded: Recorded) -> list[MeasuredFigure]:
    return [
        MeasuredFigure(recorded, name, value)
        for name, value in recorded.setup.row.figures.items()
        if name in recorded.figures
    ]


def predicted(target: MeasuredFigure, model: StepModel) -> float:
    """The figure `model` gives on the target's replay (its steps held, each pass's side chosen by `model`)."""
    return target.recorded.predict(target.figure, model)


class Design:
    """Every target's figure as `a(sides) · θ + idle`, for all targets at once: the recorded rows' groups and
    the targets' shares of them in flat arrays, so a model's sides and the matrix `a` are a few array
    operations (what makes a cross-validation fold cheap)."""

    def __init__(self, data: Sequence[MeasuredFigure]) -> None:
        if not data:
            raise ValueError("no corpus rows to fit")
        self.data = list(data)
        rows: dict[int, int] = {}
        recs: list[Recorded] = []
        for t in data:
            if id(t.recorded) not in rows:
                rows[id(t.recorded)] = len(recs)
                recs.append(t.recorded)
        self.names = sorted({n for r in recs for n in r.names})
        index = {n: i for i, n in enumerate(self.names)}
        self.param = np.array([[index[n] for n in r.names] for r in recs])  # (R, ROLES)
        offsets = np.cumsum([0] + [len(r.groups) for r in recs])
        self.groups = np.concatenate([r.groups for r in recs]) if recs else np.zeros((0, COLUMNS))
        self.group_row = np.repeat(np.arange(len(recs)), [len(r.groups) for r in recs])
        self.target_row = np.array([rows[id(t.recorded)] for t in data])
        entries_t, entries_g, entries_v, fixed, idle = [], [], [], [], []
        for i, t in enumerate(data):
            f = t.recorded.figures[t.figure]
            r = self.target_row[i]
            entries_t.append(np.full(len(f.sided), i))
            entries_g.append(offsets[r] + np.arange(len(f.sided)))
            entries_v.append(f.sided)
            fixed.append(f.fixed)
            idle.append(f.idle_s)
        self.entry_target = np.concatenate(entries_t)
        self.entry_group = np.concatenate(entries_g)
        self.entry_values = np.concatenate(entries_v)
        self.fixed = np.array(fixed)
        self.idle = np.array(idle)
        self.y = np.array([t.y_s for t in data])
        self.sources = np.array([t.recorded.setup.row.source.id for t in data])
        # for `matrix`: the groups' and entries' columns contiguous, each row's group count, each target's entries
        self._group_columns = np.ascontiguousarray(self.groups.T)
        self._entry_columns = np.ascontiguousarray(self.entry_values.T)
        self._row_groups = np.array([len(r.groups) for r in recs])
        self._entry_count = np.array([len(t.recorded.figures[t.figure].sided) for t in data])
        self._entry_start = np.cumsum(self._entry_count) - self._entry_count
        self._memo: tuple[np.ndarray, np.ndarray] | None = None  # the last sides and their matrix

    def values(self, model: StepModel) -> np.ndarray:
        return np.array([model.value(n) for n in self.names])

    def matrix(self, x: np.ndarray) -> np.ndarray:
        """(measured figures, parameters): `a` with every group's side chosen by the parameter values `x`.

        The sides change in few groups from one round of a fit to the next and from one fold to the next, and a
        target's row of `a` depends on its own row's groups' sides alone: the rows of `a` whose recorded row has
        no group that changed side since the last call are kept, the others summed again as the first call sums
        them (the same entries in the same order: the same bits)."""
        side = self._sides(x)
        if self._memo is None:
            a = self._rows(side, np.arange(len(self.data)))
        else:
            last_side, last = self._memo
            changed = side != last_side
            if not changed.any():
                return last.copy()
            moved = np.zeros(len(self.param), dtype=bool)
            moved[self.group_row[changed]] = True
            at = np.nonzero(moved[self.target_row])[0]
            a = last.copy()
            a[at] = self._rows(side, at)
        self._memo = (side, a)
        return a.copy()

    def _sides(self, x: np.ndarray) -> np.ndarray:
        """Per group: True where memory is the longer side under `x` (`recorded.memory_side`'s sums, term by
        term in its order, on contiguous columns)."""
        row_values = x[self.param]  # (R, ROLES)
        memory = np.zeros(len(self.groups))
        compute = np.zeros(len(self.groups))
        for j in range(SIDED_ROLES):
            part = self._group_columns[ROLE_COLUMN[j]] * np.repeat(row_values[:, j], self._row_groups)
            if ROLE_MEMORY[j]:
                memory += part
            else:
                compute += part
        return memory >= compute

    def _rows(self, side: np.ndarray, at: np.ndarray) -> np.ndarray:
        """The rows `at` of `a` under the groups' sides `side`: each role's seconds summed over a target's entries
        in their order, then added to the role's parameter's column in role order."""
        count = self._entry_count[at]
        first = np.cumsum(count) - count
        entries = np.arange(int(count.sum())) + np.repeat(self._entry_start[at] - first, count)
        local = np.repeat(np.arange(len(at)), count)  # each entry's place in `at`
        entry_side = side[self.entry_group[entries]]
        a = np.zeros((len(at), len(self.names)))
        rows_at = np.arange(len(at))
        params = self.param[self.target_row[at]]  # (targets at, ROLES)
        sums: dict[tuple[int, bool], np.ndarray] = {}  # roles 0 and 1, 3 and 4 sum the same column and side
        for j in range(SIDED_ROLES):
            key = (ROLE_COLUMN[j], ROLE_MEMORY[j])
            if key not in sums:
                mask = entry_side if ROLE_MEMORY[j] else ~entry_side
                weights = self._entry_columns[ROLE_COLUMN[j]][entries] * mask
                sums[key] = np.bincount(local, weights=weights, minlength=len(at))
            np.add.at(a, (rows_at, params[:, j]), sums[key])
        for j in range(SIDED_ROLES, len(ROLES)):
            np.add.at(a, (rows_at, params[:, j]), self.fixed[at, j - SIDED_ROLES])
        return a

    def seconds(self, model: StepModel) -> np.ndarray:
        """Every target's predicted seconds under `model`."""
        x = self.values(model)
        return self.matrix(x) @ x + self.idle


def nnls(a: np.ndarray, b: np.ndarray, iterations: int = 500, free: np.ndarray | None = None) -> np.ndarray:
    """min ||a x - b|| with x >= 0: Lawson and Hanson's active-set method (Solving Least Squares Problems,
    1974, ch. 23): free the variable whose gradient most wants to grow, solve on the free set, step back to
    the boundary where a free variable would turn negative. A tall `a` is first reduced to its QR triangle (the
    same minimiser, a system of its columns' size).

    `free`: the variables to start free (a guess of the solution's support, e.g. the last round's of a fit):
    they are solved for at once, those that come out <= 0 dropped until the rest are positive, and the method
    goes on from there. The minimiser is unique (a fit's system has full column rank) and is the least-squares
    solution on its support, so a start only saves the steps that would have found that support: the result is
    the same solve on the same free set as from a cold start."""
    if a.shape[0] > a.shape[1]:
        q, r = np.linalg.qr(a)
        a, b = r, q.T @ b
    n = a.shape[1]
    x = np.zeros(n)
    tol = 1e-12 * max(1.0, float(np.abs(a).max()) * max(1.0, float(np.abs(b).max())))
    free = np.zeros(n, dtype=bool) if free is None else free.copy()
    while free.any():
        z = np.zeros(n)
        z[free] = np.linalg.lstsq(a[:, free], b, rcond=None)[0]
        if (z[free] > 0).all():
            x = z
            break
        free &= z > 0
    for _ in range(iterations):
        grad = a.T @ (b - a @ x)
        candidates = np.where(~free & (grad > tol))[0]
        if not len(candidates):
            break
        free[candidates[np.argmax(grad[candidates])]] = True
        while True:
            z = np.zeros(n)
            z[free] = np.linalg.lstsq(a[:, free], b, rcond=None)[0]
            if (z[free] > 0).all():
                x = z
                break
            bad = free & (z <= 0)
            alpha = float(np.min(x[bad] / (x[bad] - z[bad])))
            x = x + alpha * (z - x)
            free &= x > tol
            x[~free] = 0.0
    return x


@dataclass(frozen=True)
class FitResult:
    model: StepModel
    rounds: int
    rows: int  # targets fitted
    trimmed: int
    median_relative: float  # over the fitted targets, in-sample


def fit_design(
    design: Design,
    train: np.ndarray | None = None,
    start: StepModel | None = None,
    *,
    note: str = "",
    pull: float | Mapping[str, float] = LAMBDA,
) -> FitResult:
    """The parameter values that best explain the design's targets where `train` is True (module docstring;
    `pull`: the priors' weight λ, or λ per engine: a parameter's engine is its name's first word); parameters no
    training target touches keep their prior (left out)."""
    train = np.ones(len(design.data), dtype=bool) if train is None else train
    if not train.any():
        raise ValueError("no corpus rows to fit")
    used = np.unique(design.param[design.target_row[train]])
    names = [design.names[i] for i in used]
    priors = np.array([prior(n)[0] for n in names])
    scales = np.array([prior(n)[1] for n in names])
    pulls = np.array([pull_of(pull, n) for n in names])
    per_source: dict[str, int] = defaultdict(int)
    for src in design.sources[train]:
        per_source[str(src)] += 1
    y = design.y[train]
    row_w = 1.0 / (y * np.sqrt([per_source[str(src)] for src in design.sources[train]]))
    full = design.values(start or StepModel({}))
    x = full[used]
    keep = np.ones(len(y), dtype=bool)
    rounds = 0
    for rounds in range(1, ROUNDS + 1):
        full[used] = x
        a = design.matrix(full)[np.ix_(train, used)]
        b = y - design.idle[train]
        w = row_w * keep
        lhs = np.vstack([a * w[:, None], np.diag(pulls / scales)])
        rhs = np.concatenate([b * w, pulls * priors / scales])
        col = np.linalg.norm(lhs, axis=0)
        col[col == 0] = 1.0
        sol = nnls(lhs / col, rhs, free=x > 0) / col  # the last round's support (the start's in the first)
        rel = np.abs((a @ sol + design.idle[train]) / y - 1)
        moved = float(np.max(np.abs(sol - x) / np.maximum(np.abs(x), 1e-12)))
        x = sol
        if rounds >= 2:
            keep = rel <= TRIM
            if keep.sum() < len(y) // 2:
                keep[:] = True
        if moved < 1e-6 and rounds >= 3:
            break
    model = StepModel({n: float(v) for n, v in zip(names, x, strict=True)}, {"note": note})
    got = design.seconds(model)
    rel = np.array(
        [abs(_figure(design.data[i], got[i]) / design.data[i].measured - 1) for i in np.nonzero(train)[0]]
    )
    return FitResult(model, rounds, int(train.sum()), int((~keep).sum()), float(np.median(rel)))


def pull_of(pull: float | Mapping[str, float], name: str) -> float:
    """The prior's pull on parameter `name`: one λ, or its engine's (the name's first word; LAMBDA if absent)."""
    if isinstance(pull, Mapping):
        return float(pull.get(name.partition(".")[0], LAMBDA))
    return float(pull)


def _figure(t: MeasuredFigure, seconds: float) -> float:
    return t.recorded.figures[t.figure].of_seconds(float(seconds))


def fit_figures(
    data: Sequence[MeasuredFigure],
    start: StepModel | None = None,
    *,
    note: str = "",
    pull: float | Mapping[str, float] = LAMBDA,
) -> FitResult:
    """`fit_design` on every target of `data`."""
    return fit_design(Design(data), start=start, note=note, pull=pull)

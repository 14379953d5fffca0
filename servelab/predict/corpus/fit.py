"""Fit the step model's parameters to corpus rows: one procedure, the sibling of `calibrate`'s.

Each row is replayed once (`harness.trace`, priced by a given model: the priors for cross-validation, so the
replay knows nothing of any measurement) and every figure it measured is a weighted sum of the replayed steps'
times plus idle time. With each pass on the memory or the compute side of its max, a step's time is linear in the
parameters (predict/stepmodel.py), so every figure is `a · θ + idle`. The fit solves

    min Σ_rows w_row ((a · θ + idle - y) / y)^2  +  λ^2 Σ_params ((θ_i - prior_i) / scale_i)^2,   θ >= 0

by non-negative least squares (Lawson and Hanson's active-set method, `nnls` below): relative error, each source's figures weighted 1/sqrt(count)
in total (a source with many rows does not drown the rest), and a pull of weight λ towards each parameter's
sourced prior, so a parameter the rows barely touch stays near what servelab knew without them (the
regularisation `calibrate` does by keeping a figure the data does not touch). The sides are re-chosen with the
new parameters and the system solved again until they stop changing; rows the fit misses by more than TRIM sit
out the later rounds (a row the model cannot explain does not bend the rest), as in calibrate.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from servelab.predict.corpus.harness import Setup, Trace
from servelab.predict.stepmodel import ATTENTION_UNIT, StepModel, prior

ROLES = ("weights", "memory", "kv", "compute", "backend", "attention", "launch", "allreduce", "host", "token")
LAMBDA = 0.1  # the prior's pull, in units of one row's relative error
TRIM = 1.0  # rows missed by more than this (relative) sit out later rounds
ROUNDS = 12


@dataclass(frozen=True)
class Target:
    """One measured figure of one row, with the replay that prices it."""

    setup: Setup
    trace: Trace
    figure: str
    measured: float

    @property
    def y_s(self) -> float:
        """The measured figure as seconds of steps: a time as is, a rate as its count over the rate."""
        f = self.trace.figures[self.figure]
        if f.count:
            return f.count / self.measured
        return self.measured / 1e3 * f.divisor


def targets(setup: Setup, trace: Trace) -> list[Target]:
    return [
        Target(setup, trace, name, value)
        for name, value in setup.row.figures.items()
        if name in trace.figures
    ]


def _pass_sides(s: Setup, t: Trace, model: StepModel) -> np.ndarray:
    """Per pass: True where memory is the longer side under `model`."""
    n = s.regime.names()
    v = {role: model.value(name) for role, name in n.items()}
    bw = s.gpu.bandwidth_bytes_s
    unit = s.gpu.tensor_flops(s.regime.unit)
    att = s.gpu.tensor_flops(ATTENTION_UNIT)
    p = t.passes
    memory = p[:, 0] / bw * (v["weights"] + v["memory"]) + p[:, 1] / bw * v["kv"]
    compute = p[:, 2] / unit * (v["compute"] + v["backend"]) + p[:, 3] / att * v["attention"]
    return memory >= compute


def step_coefficients(s: Setup, t: Trace, model: StepModel) -> np.ndarray:
    """(steps, ROLES) coefficients: a step's seconds = its row · the roles' parameter values."""
    memory = _pass_sides(s, t, model)
    bw = s.gpu.bandwidth_bytes_s
    unit = s.gpu.tensor_flops(s.regime.unit)
    att = s.gpu.tensor_flops(ATTENTION_UNIT)
    p = t.passes
    per_pass = np.zeros((len(p), len(ROLES)))
    weights = np.where(memory, p[:, 0] / bw, 0.0)
    per_pass[:, 0] = weights
    per_pass[:, 1] = weights
    per_pass[:, 2] = np.where(memory, p[:, 1] / bw, 0.0)
    matmul = np.where(memory, 0.0, p[:, 2] / unit)
    per_pass[:, 3] = matmul
    per_pass[:, 4] = matmul
    per_pass[:, 5] = np.where(memory, 0.0, p[:, 3] / att)
    per_pass[:, 6] = s.layers
    per_pass[:, 7] = p[:, 4]
    steps = np.zeros((t.steps, len(ROLES)))
    for j in range(8):
        steps[:, j] = np.bincount(t.pass_step, weights=per_pass[:, j], minlength=t.steps)
    steps[:, 8] = 1.0
    steps[:, 9] = t.step_tokens
    return steps


def _figure_row(target: Target, steps: np.ndarray) -> tuple[np.ndarray, float]:
    f = target.trace.figures[target.figure]
    idx = np.fromiter(f.weights.keys(), dtype=int, count=len(f.weights))
    w = np.fromiter(f.weights.values(), dtype=float, count=len(f.weights))
    return (w @ steps[idx] if len(idx) else np.zeros(len(ROLES))), f.idle_s


def predicted(target: Target, model: StepModel) -> float:
    """The figure `model` gives on the target's replay (its step structure held)."""
    steps = step_coefficients(target.setup, target.trace, model)
    row, idle = _figure_row(target, steps)
    names = target.setup.regime.names()
    seconds = float(row @ np.array([model.value(names[r]) for r in ROLES])) + idle
    f = target.trace.figures[target.figure]
    if f.count:
        return f.count / seconds if seconds > 0 else math.inf
    return seconds / f.divisor * 1e3


def nnls(a: np.ndarray, b: np.ndarray, iterations: int = 500) -> np.ndarray:
    """min ||a x - b|| with x >= 0: Lawson and Hanson's active-set method (Solving Least Squares Problems,
    1974, ch. 23): free the variable whose gradient most wants to grow, solve on the free set, step back to
    the boundary where a free variable would turn negative."""
    n = a.shape[1]
    x = np.zeros(n)
    free = np.zeros(n, dtype=bool)
    tol = 1e-12 * max(1.0, float(np.abs(a).max()) * max(1.0, float(np.abs(b).max())))
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


def fit_targets(
    data: Sequence[Target], start: StepModel | None = None, *, note: str = "", pull: float = LAMBDA
) -> FitResult:
    """The parameter values that best explain `data` (module docstring; `pull`: the priors' weight λ);
    parameters no target touches are left out of the result (they keep their prior)."""
    if not data:
        raise ValueError("no corpus rows to fit")
    names = sorted({n for t in data for n in t.setup.regime.names().values()})
    index = {n: i for i, n in enumerate(names)}
    priors = np.array([prior(n)[0] for n in names])
    scales = np.array([prior(n)[1] for n in names])
    per_source: dict[str, int] = defaultdict(int)
    for t in data:
        per_source[t.setup.row.source.id] += 1
    row_w = np.array([1.0 / (t.y_s * math.sqrt(per_source[t.setup.row.source.id])) for t in data])
    model = start or StepModel({})
    keep = np.ones(len(data), dtype=bool)
    x = np.array([model.value(n) for n in names])
    rounds = 0
    cache: dict[int, tuple[Setup, Trace]] = {}
    for rounds in range(1, ROUNDS + 1):
        a = np.zeros((len(data), len(names)))
        fixed = np.zeros(len(data))
        steps_of: dict[int, np.ndarray] = {}
        for i, t in enumerate(data):
            key = id(t.trace)
            if key not in steps_of:
                cache[key] = (t.setup, t.trace)
                steps_of[key] = step_coefficients(t.setup, t.trace, model)
            row, idle = _figure_row(t, steps_of[key])
            roles = t.setup.regime.names()
            for j, role in enumerate(ROLES):
                a[i, index[roles[role]]] += row[j]
            fixed[i] = idle
        y = np.array([t.y_s for t in data]) - fixed
        w = row_w * keep
        lhs = np.vstack([a * w[:, None], np.diag(pull / scales)])
        rhs = np.concatenate([y * w, pull * priors / scales])
        col = np.linalg.norm(lhs, axis=0)
        col[col == 0] = 1.0
        sol = nnls(lhs / col, rhs) / col
        rel = np.abs((a @ sol + fixed) / np.array([t.y_s for t in data]) - 1)
        moved = float(np.max(np.abs(sol - x) / np.maximum(np.abs(x), 1e-12)))
        x = sol
        model = StepModel({n: float(v) for n, v in zip(names, x, strict=True)}, {"note": note})
        if rounds >= 2:
            keep = rel <= TRIM
            if keep.sum() < len(data) // 2:
                keep[:] = True
        if moved < 1e-6 and rounds >= 3:
            break
    rel = np.array([abs(predicted(t, model) / t.measured - 1) for t in data])
    return FitResult(model, rounds, len(data), int((~keep).sum()), float(np.median(rel)))

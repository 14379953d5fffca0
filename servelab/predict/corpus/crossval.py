"""Cross-validation of the step model on the corpus: fit on all rows but a group's, predict the group's.

Groups are sources (leave-one-source-out) or GPU types (leave-one-GPU-type-out). A left-out row is predicted by a
full replay priced with the parameters fitted without it (`harness.predict_row`), never with parameters fitted
on itself. The replays the fits read are priced by the priors alone (no measurement in them).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from statistics import median

from servelab.predict.corpus.fit import FitResult, Target, fit_targets, targets
from servelab.predict.corpus.harness import Setup, Trace, predict_row, setup, trace
from servelab.predict.corpus.load import gpu_class
from servelab.predict.corpus.schema import Measurement
from servelab.predict.stepmodel import StepModel, prior_model

FIGURE_GROUPS = {
    "ttft_ms_median": "TTFT",
    "ttft_ms_mean": "TTFT",
    "tpot_ms_median": "TPOT/ITL",
    "tpot_ms_mean": "TPOT/ITL",
    "itl_ms_median": "TPOT/ITL",
    "itl_ms_mean": "TPOT/ITL",
    "output_tok_s": "output tok/s",
    "total_tok_s": "output tok/s",
    "request_rate": "output tok/s",
    "pp_tok_s": "pp tok/s",
    "tg_tok_s": "tg tok/s",
}


@dataclass(frozen=True)
class Prepared:
    """The corpus rows servelab can predict, their prior replays, and those it cannot with the reason."""

    setups: tuple[Setup, ...]
    traces: dict[str, Trace]  # row label -> replay at the priors
    skipped: tuple[tuple[Measurement, str], ...]

    def targets(self, keep: Callable[[Setup], bool] = lambda s: True) -> list[Target]:
        return [t for s in self.setups if keep(s) for t in targets(s, self.traces[s.row.label])]


def prepare(rows: Iterable[Measurement]) -> Prepared:
    setups, traces, skipped = [], {}, []
    for row in rows:
        if row.excluded:
            skipped.append((row, f"excluded by the corpus: {row.excluded}"))
            continue
        s = setup(row)
        if isinstance(s, str):
            skipped.append((row, s))
            continue
        t = trace(s, prior_model())
        if not any(name in t.figures for name in row.figures):
            skipped.append((row, "none of its figures is one servelab predicts"))
            continue
        setups.append(s)
        traces[row.label] = t
    return Prepared(tuple(setups), traces, tuple(skipped))


@dataclass(frozen=True)
class Prediction:
    setup: Setup
    figure: str
    measured: float
    predicted: float
    fold: str  # the group left out

    @property
    def error(self) -> float:
        return self.predicted / self.measured - 1

    @property
    def engine(self) -> str:
        return self.setup.row.engine

    @property
    def gpu_class(self) -> str:
        return gpu_class(self.setup.gpu)

    @property
    def group(self) -> str:
        return FIGURE_GROUPS.get(self.figure, self.figure)

    @property
    def batch(self) -> int:
        w = self.setup.row.workload
        return w.concurrency or w.batch or 1


@dataclass
class CrossValidation:
    kind: str  # "source", "gpu" or "none" (today's figures, nothing fitted)
    predictions: list[Prediction] = field(default_factory=list)
    fits: dict[str, FitResult] = field(default_factory=dict)


def _predict(s: Setup, model: StepModel | None, fold: str) -> list[Prediction]:
    got = predict_row(s, model)
    return [Prediction(s, k, s.row.figures[k], v, fold) for k, v in got.items()]


def uncalibrated(p: Prepared) -> CrossValidation:
    """Today's predictions: the plan's figures, no step model (nothing fitted, nothing to leave out)."""
    cv = CrossValidation("none")
    for s in p.setups:
        cv.predictions += _predict(s, None, "-")
    return cv


def leave_one_out(p: Prepared, kind: str) -> CrossValidation:
    """Fit without each group (`kind`: "source" or "gpu"), predict that group with that fit."""
    key: Callable[[Setup], str] = (lambda s: s.row.source.id) if kind == "source" else (lambda s: s.gpu.name)
    groups = sorted({key(s) for s in p.setups})
    cv = CrossValidation(kind)
    for g in groups:
        train = p.targets(lambda s, g=g: key(s) != g)  # type: ignore[misc]
        if not train:
            continue
        result = fit_targets(train, note=f"fitted without {kind} {g}")
        cv.fits[g] = result
        for s in p.setups:
            if key(s) == g:
                cv.predictions += _predict(s, result.model, g)
    return cv


def fit_all(p: Prepared) -> FitResult:
    return fit_targets(p.targets(), note="fitted on every usable corpus row")


def med(values: Sequence[float]) -> float:
    return float(median(values)) if values else float("nan")


def table(cv: CrossValidation) -> dict[tuple[str, str, str], tuple[float, int]]:
    """(engine, figure group, GPU class or 'all') -> (median |error|, rows)."""
    cells: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    for pr in cv.predictions:
        for cls in (pr.gpu_class, "all"):
            cells[(pr.engine, pr.group, cls)].append(abs(pr.error))
            cells[("all", pr.group, cls)].append(abs(pr.error))
            cells[(pr.engine, "all", cls)].append(abs(pr.error))
            cells[("all", "all", cls)].append(abs(pr.error))
    return {k: (med(v), len(v)) for k, v in cells.items()}


BATCH_RANGES = ((1, "1"), (16, "2-16"), (128, "17-128"), (10**9, ">128"))


def batch_range(batch: int) -> str:
    return next(name for top, name in BATCH_RANGES if batch <= top)


def bands(cv: CrossValidation, low: float = 0.1, high: float = 0.9, least: int = 5) -> dict[str, list[float]]:
    """Error bands from cross-validation residuals: for each regime "engine|gpu class|figure group|batch range"
    (and the coarser "engine|*|figure group|*", "*|*|figure group|*") with at least `least` left-out rows, the
    `low` and `high` quantiles of measured / predicted. A prediction p is then expected in (p x lo, p x hi)."""
    ratios: dict[str, list[float]] = defaultdict(list)
    for pr in cv.predictions:
        if pr.predicted <= 0:
            continue
        r = pr.measured / pr.predicted
        for key in (f"{pr.engine}|{pr.gpu_class}|{pr.group}|{batch_range(pr.batch)}", f"{pr.engine}|*|{pr.group}|*",
                    f"*|*|{pr.group}|*"):  # fmt: skip
            ratios[key].append(r)
    out = {}
    for key, values in ratios.items():
        if len(values) >= least:
            ordered = sorted(values)
            out[key] = [_quantile(ordered, low), _quantile(ordered, high)]
    return out


def _quantile(ordered: list[float], q: float) -> float:
    pos = q * (len(ordered) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)

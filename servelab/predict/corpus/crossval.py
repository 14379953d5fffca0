"""Cross-validation of the step model on the corpus: fit on all rows but a group's, predict the group's.

Groups are sources (leave-one-source-out) or GPU types (leave-one-GPU-type-out). Every row is replayed once,
priced by the priors alone (no measurement in it), and recorded as what the parameters multiply
(`recorded.record`); a fold fits on the other groups' rows and prices the left-out rows' recorded replays with
that fit (each pass's side of its max chosen by it, the replay's steps held): no row is ever predicted by
parameters fitted on itself.
"""

from __future__ import annotations

import hashlib
import os
import pickle
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median

import numpy as np

from servelab.engines.registry import registry_name
from servelab.predict.corpus.fit import (
    LAMBDA,
    Design,
    FitResult,
    MeasuredFigure,
    fit_design,
    measured_figures,
)
from servelab.predict.corpus.harness import PassLog, Setup, figures, is_bench, pass_log, rates_for, setup
from servelab.predict.corpus.load import gpu_class
from servelab.predict.corpus.recorded import Recorded, record
from servelab.predict.corpus.schema import Measurement
from servelab.predict.stepmodel import prior_model

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


@dataclass
class Prepared:
    """The corpus rows servelab can predict, recorded once (`recorded.record`), and those it cannot with the
    reason."""

    recorded: tuple[Recorded, ...]
    skipped: tuple[tuple[Measurement, str], ...]
    _design: Design | None = None

    @property
    def setups(self) -> tuple[Setup, ...]:
        return tuple(r.setup for r in self.recorded)

    def measured_figures(self, keep: Callable[[Setup], bool] = lambda s: True) -> list[MeasuredFigure]:
        return [t for r in self.recorded if keep(r.setup) for t in measured_figures(r)]

    @property
    def design(self) -> Design:
        """Every target of every recorded row, built once for all folds."""
        if self._design is None:
            self._design = Design(self.measured_figures())
        return self._design


def prepare(
    rows: Iterable[Measurement],
    progress: Callable[[int, int, Measurement], None] | None = None,
    cache: Path | None = None,
    max_concurrency: int | None = None,
) -> Prepared:
    """Each row set up, replayed once at the priors and recorded (its figures from the plan alone kept as
        today's); `progress(done, total, row)` before each row. With `cache`, a row's setup and replay are kept there under
        a key of the row and of every servelab file but the fit's own (`replay_fingerprint`), so a second run, or one
        after a change to the fit alone, replays nothing. Serving rows above `max_concurrency` clients are left out
    (their replay takes minutes: the time budget of a quick run), said so."""
    rows = list(rows)
    recorded, skipped = [], []
    fingerprint = replay_fingerprint() if cache is not None else ""
    for i, row in enumerate(rows):
        if progress is not None:
            progress(i, len(rows), row)
        if row.excluded:
            skipped.append((row, f"excluded by the corpus: {row.excluded}"))
            continue
        c = row.workload.concurrency or 0
        if max_concurrency is not None and c > max_concurrency and not is_bench(row):
            skipped.append((row, f"concurrency above this run's replay budget ({max_concurrency})"))
            continue
        got = _replayed(row, cache, fingerprint)
        if isinstance(got, str):
            skipped.append((row, got))
            continue
        recorded.append(record(*got))
    return Prepared(tuple(recorded), tuple(skipped))


Replayed = tuple[Setup, PassLog, dict[str, float]]


def _replay(row: Measurement) -> Replayed | str:
    s = setup(row)
    if isinstance(s, str):
        return s
    t = pass_log(s, prior_model())
    if not any(name in t.figures for name in row.figures):
        return "none of its figures is one servelab predicts"
    return s, t, {k: v for k, v in figures(t, rates_for(s, None)).items() if k in row.figures}


def _replayed(row: Measurement, cache: Path | None, fingerprint: str) -> Replayed | str:
    if cache is None:
        return _replay(row)
    key = hashlib.sha256((fingerprint + repr(row)).encode()).hexdigest()[:32]
    path = cache / f"{key}.pickle"
    if path.is_file():
        try:
            with path.open("rb") as fh:
                got: Replayed | str = pickle.load(fh)  # written by this function, keyed by content
            return got
        except (OSError, pickle.UnpicklingError, EOFError, AttributeError):
            pass
    got = _replay(row)
    cache.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")  # runs sharing the cache each write their own
    with tmp.open("wb") as fh:
        pickle.dump(got, fh, protocol=pickle.HIGHEST_PROTOCOL)
    tmp.replace(path)
    return got


# the files whose change leaves every replay as it was (the fit and what reads its results)
FIT_ONLY = (
    "predict/corpus/fit.py",
    "predict/corpus/crossval.py",
    "predict/corpus/recorded.py",
    "predict/corpus/counts.py",
    "predict/corpus/select.py",
)


def replay_fingerprint() -> str:
    """A hash of every servelab source and data file a replay may read (the corpus rows are keyed apart)."""
    root = Path(__file__).resolve().parents[2]
    h = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if not path.is_file() or path.suffix not in (".py", ".json", ".yaml") or rel in FIT_ONLY:
            continue
        if rel.startswith("predict/corpus/data/") or rel == "predict/stepmodel.json" or "__pycache__" in rel:
            continue
        h.update(rel.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


@dataclass(frozen=True)
class FigurePrediction:
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
    predictions: list[FigurePrediction] = field(default_factory=list)
    fits: dict[str, FitResult] = field(default_factory=dict)


def uncalibrated(p: Prepared) -> CrossValidation:
    """Today's predictions: the plan's figures, no step model (nothing fitted, nothing to leave out)."""
    cv = CrossValidation("none")
    for r in p.recorded:
        s = r.setup
        cv.predictions += [FigurePrediction(s, k, s.row.figures[k], v, "-") for k, v in r.today.items()]
    return cv


def fold_key(kind: str) -> Callable[[Setup], str]:
    if kind == "source":
        return lambda s: s.row.source.id
    if kind == "gpu":
        return lambda s: s.gpu.name
    raise ValueError(f"unknown cross-validation {kind!r} (source or gpu)")


def leave_one_out(p: Prepared, kind: str, pull: float | Mapping[str, float] = LAMBDA) -> CrossValidation:
    """Fit without each group (`kind`: "source" or "gpu"), predict that group's recorded rows with that fit
    (`pull`: the priors' weight λ, fit.py)."""
    key = fold_key(kind)
    design = p.design
    keys = np.array([key(t.recorded.setup) for t in design.data])
    cv = CrossValidation(kind)
    for g in sorted(set(keys.tolist())):
        out = keys == g
        if out.all():
            continue
        result = fit_design(design, ~out, note=f"fitted without {kind} {g}", pull=pull)
        cv.fits[g] = result
        seconds = design.seconds(result.model)
        for i in np.nonzero(out)[0]:
            t = design.data[i]
            f = t.recorded.figures[t.figure]
            cv.predictions.append(
                FigurePrediction(t.recorded.setup, t.figure, t.measured, f.of_seconds(seconds[i]), g)
            )
    return cv


def fit_all(p: Prepared, pull: float | Mapping[str, float] = LAMBDA) -> FitResult:
    return fit_design(p.design, note="fitted on every usable corpus row", pull=pull)


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


Quantiles = Mapping[str, tuple[float, float]]  # figure group -> (low, high) quantile of a band


def bands(
    cv: CrossValidation,
    low: float = 0.1,
    high: float = 0.9,
    least: int = 5,
    quantiles: Quantiles | None = None,
) -> dict[str, list[float]]:
    """Error bands from cross-validation residuals: for each regime "engine|gpu class|figure group|batch range"
    (and the coarser "engine|*|figure group|*", "*|*|figure group|*") with at least `least` left-out rows, the
    `low` and `high` quantiles (a figure group's own in `quantiles`, `select.calibrated_quantiles`) of measured /
    predicted. A prediction p is then expected in (p x lo, p x hi)."""
    ratios: dict[str, list[float]] = defaultdict(list)
    groups: dict[str, str] = {}
    for pr in cv.predictions:
        if pr.predicted <= 0:
            continue
        r = pr.measured / pr.predicted
        for key in band_keys(pr):
            ratios[key].append(r)
            groups[key] = pr.group
    out = {}
    for key, values in ratios.items():
        if len(values) >= least:
            ordered = sorted(values)
            lo, hi = (quantiles or {}).get(groups[key], (low, high))
            out[key] = [_quantile(ordered, lo), _quantile(ordered, hi)]
    return out


def band_keys(pr: FigurePrediction) -> tuple[str, str, str]:
    """The regimes a prediction's band is looked up in, the narrowest first (StepModel.band's order)."""
    e = registry_name(pr.engine)
    return (
        f"{e}|{pr.gpu_class}|{pr.group}|{batch_range(pr.batch)}",
        f"{e}|*|{pr.group}|*",
        f"*|*|{pr.group}|*",
    )


def band_coverage(
    cv: CrossValidation,
    low: float = 0.1,
    high: float = 0.9,
    least: int = 5,
    quantiles: Quantiles | None = None,
) -> dict[str, tuple[int, int]]:
    """How honest the bands are: each left-out row's figure checked against the band its regime gets from the
    *other* folds' residuals (the row's own fold left out of the band too; `bands`' quantiles); figure group ->
    (inside, rows)."""
    ratios: dict[str, list[tuple[str, float]]] = defaultdict(list)
    for pr in cv.predictions:
        if pr.predicted > 0:
            for key in band_keys(pr):
                ratios[key].append((pr.fold, pr.measured / pr.predicted))
    bands_without: dict[tuple[str, str], tuple[float, float] | None] = {}
    out: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for pr in cv.predictions:
        if pr.predicted <= 0:
            continue
        band = None
        for key in band_keys(pr):
            if (key, pr.fold) not in bands_without:
                others = sorted(r for f, r in ratios[key] if f != pr.fold)
                lo, hi = (quantiles or {}).get(pr.group, (low, high))
                bands_without[(key, pr.fold)] = (
                    (_quantile(others, lo), _quantile(others, hi)) if len(others) >= least else None
                )
            band = bands_without[(key, pr.fold)]
            if band is not None:
                break
        for group in (pr.group, "all"):
            out[group][1] += 1
            if band is not None and band[0] <= pr.measured / pr.predicted <= band[1]:
                out[group][0] += 1
    return {k: (v[0], v[1]) for k, v in out.items()}


def _quantile(ordered: list[float], q: float) -> float:
    pos = q * (len(ordered) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)

"""What ships of the fit, each choice made by cross-validation (docs/predict.md "What ships"):

1. **The prior's pull, per engine.** Every step-model parameter is one engine's (predict/stepmodel.py), so each
   engine's fit is its own. For each λ of `PULLS`, leave-one-source-out over every row; an engine takes the λ
   whose left-out figures have the smallest median |error| over all its figures (a tie: the larger λ, the one
   nearer the priors).
2. **Fit or priors, per engine.** At its λ, an engine's fit is kept only if, for each figure group it has
   rows of, the fit's leave-one-source-out median |error| is no worse than its priors' (the step model with
   that engine's parameters at their sourced priors: nothing fitted, so its error is out of sample as it is).
   Otherwise the engine's parameters stay at their priors in the shipped model: no engine's `corpus` figure is
   worse under cross-validation than its priors' (the benchmark prints the priors' errors beside the plan's
   figures': on the 1,831-row corpus the serving engines' priors are a little worse than the plan in TTFT).
3. **Bands that cover.** For each figure group, the narrowest quantile pair of `QUANTILES` whose band (from
   the *other* folds' residuals of the row's regime, `crossval.band_coverage`) holds at least `COVER` of the
   shipped model's left-out figures under both cross-validations (sources left out, GPU types left out); the
   widest pair where none does.

The λ is chosen on the same folds that report its error (not nested): one number per engine from six.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from servelab.engines.registry import registry_name
from servelab.predict.corpus.crossval import (
    CrossValidation,
    FigurePrediction,
    Prepared,
    band_coverage,
    fold_key,
    leave_one_out,
    med,
)
from servelab.predict.stepmodel import StepModel, prior_model

PULLS = (0.01, 0.03, 0.1, 0.3, 1.0, 3.0)
QUANTILES = ((0.1, 0.9), (0.075, 0.925), (0.05, 0.95), (0.025, 0.975), (0.0, 1.0))
COVER = 0.8


@dataclass(frozen=True)
class EngineChoice:
    """One engine's λ and whether its fit ships, with the cross-validated figures that decided it."""

    engine: str  # registry name
    pull: float
    use_fit: bool
    fit: dict[str, float]  # figure group -> LOSO median |error| of the fit at `pull`
    priors: dict[str, float]  # figure group -> median |error| at the priors
    grid: dict[float, float]  # λ -> LOSO median |error| over all the engine's figures

    def to_json(self) -> dict[str, Any]:
        return {
            "pull": self.pull,
            "uses": "fit" if self.use_fit else "priors",
            "loso_median_abs_error": {g: round(v, 4) for g, v in sorted(self.fit.items())},
            "priors_median_abs_error": {g: round(v, 4) for g, v in sorted(self.priors.items())},
            "pull_grid": {str(k): round(v, 4) for k, v in sorted(self.grid.items())},
        }


@dataclass
class Selection:
    choices: dict[str, EngineChoice]
    loso: CrossValidation  # the shipped model's leave-one-source-out predictions (fit or priors per engine)
    runs: dict[float, CrossValidation] = field(default_factory=dict)  # LOSO at each λ of the grid

    @property
    def pulls(self) -> dict[str, float]:
        return {e: c.pull for e, c in self.choices.items()}

    @property
    def fitted(self) -> set[str]:
        return {e for e, c in self.choices.items() if c.use_fit}

    def shipped(self, model: StepModel) -> StepModel:
        """`model` (a fit on every row at `pulls`) with the engines that keep their priors left at them."""
        keep = {n: v for n, v in model.values.items() if n.partition(".")[0] in self.fitted}
        return StepModel(keep, model.provenance, model.bands)


def _by_engine(predictions: Sequence[FigurePrediction]) -> dict[str, dict[str, list[float]]]:
    """engine -> figure group (and "all") -> |errors|."""
    out: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for pr in predictions:
        e = registry_name(pr.engine)
        out[e][pr.group].append(abs(pr.error))
        out[e]["all"].append(abs(pr.error))
    return out


def at_priors(p: Prepared, kind: str) -> CrossValidation:
    """Every row priced by the step model at its priors (nothing fitted), each prediction labelled with the fold
    `kind` would leave it out in, so its band is taken from the other folds' residuals."""
    design = p.design
    seconds = design.seconds(prior_model())
    key = fold_key(kind)
    cv = CrossValidation(kind)
    for i, t in enumerate(design.data):
        f = t.recorded.figures[t.figure]
        s = t.recorded.setup
        cv.predictions.append(FigurePrediction(s, t.figure, t.measured, f.of_seconds(seconds[i]), key(s)))
    return cv


def choose(p: Prepared, pulls: Sequence[float] = PULLS) -> Selection:
    """Each engine's λ and fit-or-priors (module docstring) from leave-one-source-out at every λ of `pulls`."""
    runs = {lam: leave_one_out(p, "source", pull=lam) for lam in pulls}
    priors = _by_engine(at_priors(p, "source").predictions)
    errors = {lam: _by_engine(cv.predictions) for lam, cv in runs.items()}
    choices = {}
    for engine in sorted(priors):
        grid = {lam: med(errors[lam][engine]["all"]) for lam in pulls}
        best = min(grid.values())
        lam = max(x for x in pulls if grid[x] == best)
        fit = {g: med(v) for g, v in errors[lam][engine].items()}
        prior_errors = {g: med(v) for g, v in priors[engine].items()}
        use = all(fit[g] <= prior_errors[g] for g in fit if g != "all")
        choices[engine] = EngineChoice(engine, lam, use, fit, prior_errors, grid)
    selection = Selection(choices, CrossValidation("source"), runs)
    selection.loso = shipped_cv(p, selection, "source")
    return selection


def shipped_cv(p: Prepared, selection: Selection, kind: str) -> CrossValidation:
    """The shipped model under cross-validation `kind`: an engine whose fit ships, its left-out predictions at
    its λ (leave-one-source-out: the grid's run at that λ; engines share no parameter, so an engine's folds at one
    λ are its folds in a fit with each engine at its own); an engine kept at its priors, its priors' predictions."""
    if kind == "source":
        runs = {e: selection.runs[c.pull] for e, c in selection.choices.items()}
    else:
        joint = leave_one_out(p, kind, pull=selection.pulls)
        runs = {e: joint for e in selection.choices}
    fitted = selection.fitted
    cv = CrossValidation(kind)
    cv.predictions = [pr for pr in at_priors(p, kind).predictions if registry_name(pr.engine) not in fitted]
    for engine in sorted(fitted):
        cv.predictions += [pr for pr in runs[engine].predictions if registry_name(pr.engine) == engine]
    return cv


def calibrated_quantiles(
    *cvs: CrossValidation, candidates: Sequence[tuple[float, float]] = QUANTILES
) -> dict[str, Any]:
    """Figure group -> the narrowest quantile pair whose out-of-sample band coverage reaches COVER under every
    cross-validation of `cvs` (module docstring), and the coverage each pair gives under each: {"quantiles":
    {group: (lo, hi)}, "coverage": {kind: {group: {"lo-hi": share}}}}."""
    shares: dict[str, dict[str, dict[tuple[float, float], float]]] = {}
    for cv in cvs:
        per_pair = {pair: band_coverage(cv, *pair) for pair in candidates}
        groups = {g for c in per_pair.values() for g in c} - {"all"}
        shares[cv.kind] = {
            g: {pair: per_pair[pair][g][0] / per_pair[pair][g][1] for pair in candidates} for g in groups
        }
    chosen: dict[str, tuple[float, float]] = {}
    for g in sorted({g for by_group in shares.values() for g in by_group}):
        covers = [pair for pair in candidates if all(s[g][pair] >= COVER for s in shares.values() if g in s)]
        chosen[g] = covers[0] if covers else candidates[-1]
    coverage = {
        kind: {
            g: {f"{lo:g}-{hi:g}": round(v[(lo, hi)], 4) for lo, hi in candidates}
            for g, v in sorted(by.items())
        }
        for kind, by in shares.items()
    }
    return {"quantiles": chosen, "coverage": coverage}


def coverage_line(covered: dict[str, tuple[int, int]]) -> str:
    return ", ".join(f"{g} {i / n * 100:.0f}% of {n}" for g, (i, n) in sorted(covered.items()))


def engine_errors(cv: CrossValidation) -> dict[str, dict[str, float]]:
    return {e: {g: med(v) for g, v in groups.items()} for e, groups in _by_engine(cv.predictions).items()}

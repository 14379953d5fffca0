"""`servelab compare A B`: two stored runs side by side, per target and level, with significance.

Targets pair up by position (target 0 of A with target 0 of B); levels by name. Each latency metric is
tested with Mann-Whitney U on the per-request samples, with a bootstrap interval for the change of its
median; aggregate throughput has one value per level and
gets no p-value. A warning is raised when the workloads (or settings) differ, or a run is partial.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from servelab.report.levels import LevelFigures, all_level_figures
from servelab.report.significance import bootstrap_median_diff, mann_whitney
from servelab.store import StoredRun

Samples = Callable[[LevelFigures], list[float]]
METRICS: tuple[tuple[str, Samples], ...] = (
    ("ttft_ms", lambda lv: [r.ttft_s * 1e3 for r in lv.requests]),
    ("tpot_ms", lambda lv: [r.tpot_s * 1e3 for r in lv.requests if r.tpot_s is not None]),
    ("e2el_ms", lambda lv: [r.latency_s * 1e3 for r in lv.requests]),
    ("decode_tok_s", lambda lv: [r.decode_tok_s for r in lv.requests if r.decode_tok_s is not None]),
)


@dataclass(frozen=True, kw_only=True)
class MetricComparison:
    target_index: int
    level: str  # the level's label, "c=4" (this is what --json prints)
    metric: str  # "ttft_ms" (median) … or "output_tok_s" (aggregate)
    a: float | None
    b: float | None
    change_pct: float | None
    p_value: float | None
    significant: bool
    diff_ci: tuple[float, float] | None = None  # 95% bootstrap interval of median(B) − median(A)


@dataclass(frozen=True)
class Comparison:
    run_a: str
    run_b: str
    targets_a: tuple[str, ...]  # "engine model" per target
    targets_b: tuple[str, ...]
    warnings: tuple[str, ...]
    rows: tuple[MetricComparison, ...]


def _median(values: list[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def _change_pct(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or a == 0 else (b - a) / a * 100


NOT_LIKE = {"workload": "workloads", "settings": "settings"}  # run meta key -> the noun for several of them


def workload_warnings(runs: list[StoredRun]) -> list[str]:
    """Sentences warning that runs are not like for like (workload/settings differ, or a run is partial): one per
    kind of difference, naming every run that differs from the first, and one for the partial runs."""
    warnings = []
    first = runs[0]
    for key, nouns in NOT_LIKE.items():
        others = [r.id for r in runs[1:] if getattr(r.meta, key) != getattr(first.meta, key)]
        if others:
            warnings.append(
                f"run{'s' if len(others) > 1 else ''} {', '.join(others)} used different {nouns} from "
                f"run {first.id}: figures are not like for like"
            )
    partial = [run.id for run in runs if run.info.partial]
    if partial:
        many = len(partial) > 1
        warnings.append(
            f"run{'s' if many else ''} {', '.join(partial)} {'are' if many else 'is'} partial: "
            f"{'they' if many else 'it'} did not finish, {'their' if many else 'its'} levels may be "
            "incomplete"
        )
    return warnings


def _level_rows(a: LevelFigures, b: LevelFigures) -> list[MetricComparison]:
    rows = []
    for name, samples in METRICS:
        xa, xb = samples(a), samples(b)
        test = mann_whitney(xa, xb)
        ma, mb = _median(xa), _median(xb)
        rows.append(
            MetricComparison(
                target_index=a.target_index,
                level=a.label,
                metric=name,
                a=ma,
                b=mb,
                change_pct=_change_pct(ma, mb),
                p_value=test.p_value,
                significant=test.significant(),
                diff_ci=bootstrap_median_diff(xa, xb, rounds=1000),
            )
        )
    rows.append(
        MetricComparison(
            target_index=a.target_index,
            level=a.label,
            metric="output_tok_s",
            a=a.aggregate_tok_s,
            b=b.aggregate_tok_s,
            change_pct=_change_pct(a.aggregate_tok_s, b.aggregate_tok_s),
            p_value=None,
            significant=False,
        )
    )
    return rows


def _label(run: StoredRun) -> tuple[str, ...]:
    return tuple(f"{t.engine} {t.info.model or '?'}" for t in run.targets)


def compare_runs(run_a: StoredRun, run_b: StoredRun) -> Comparison:
    levels_b = {(lv.target_index, lv.level): lv for lv in all_level_figures(run_b)}
    rows: list[MetricComparison] = []
    missing = []
    for lv in all_level_figures(run_a):
        other = levels_b.get((lv.target_index, lv.level))
        if other is None:
            missing.append(f"target {lv.target_index} {lv.label}")
            continue
        rows += _level_rows(lv, other)
    warnings = workload_warnings([run_a, run_b])
    if missing:
        warnings.append(f"run {run_b.id} has no {', '.join(missing)}: those levels are not compared")
    return Comparison(run_a.id, run_b.id, _label(run_a), _label(run_b), tuple(warnings), tuple(rows))

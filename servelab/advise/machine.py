"""Which models fit this machine (`servelab advise --gpu auto` without a MODEL): the catalog's models and the ones
already on disk (model/local.py), each searched as `advise` searches one model, ranked by what its best
configuration delivers here for the workload.

A model's row: its best configuration (the first of its front: goodput per GPU, then cost and latency), the
context planned, the single-user speed (one user alone on that configuration: TPOT p50 and tokens/s) and the
aggregate speed (the deployment's output tokens/s at the highest load within the SLOs, or at the demand when
one is given). Models that do not fit, miss the SLO everywhere or cannot be read keep a row with the reason,
after the ranked ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from servelab.advise.core import Advice, CandidateProgress, advise, judged_json
from servelab.advise.judge import Judged, PromptPool, Setting, emulate_level, probe_config
from servelab.advise.spread import Runner
from servelab.errors import ServelabError
from servelab.model.spec import ModelSpec
from servelab.predict.machine import emulated_engine
from servelab.results.stats import LevelStats


@dataclass(frozen=True)
class Offered:
    """A model to weigh: its name, where it came from (catalog, huggingface, ollama, llama.cpp, lm-studio), its
    path on disk if any, and its description (None: `error` says why it could not be read)."""

    name: str
    source: str
    spec: ModelSpec | None
    path: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class ModelRow:
    """One model's answer: its advice and best configuration, the single-user level on it, or why none."""

    model: Offered
    advice: Advice | None = None
    best: Judged | None = None
    single: LevelStats | None = None
    reason: str = ""

    @property
    def single_tpot_ms(self) -> float | None:
        return None if self.single is None else self.single.tpot_ms.p50

    @property
    def single_tok_s(self) -> float | None:
        tpot = self.single_tpot_ms
        return 1000 / tpot if tpot else None

    def to_json(self) -> dict[str, Any]:
        m = self.model
        out: dict[str, Any] = {
            "model": m.name,
            "source": m.source,
            "path": m.path,
            "reason": self.reason or None,
        }
        if self.best is not None and self.advice is not None:
            out |= {
                "context": self.advice.context,
                "single_user_tpot_ms": self.single_tpot_ms,
                "single_user_tok_s": self.single_tok_s,
                "aggregate_tok_s": round(self.best.output_tok_s, 2),
                "best": judged_json(self.best),
                "candidates": self.advice.candidates,
                "front": [j.point.name for j in self.advice.pareto.front],
            }
        return out


def machine_advice(
    models: Sequence[Offered],
    setting: Setting,
    *,
    context: int,
    engines: tuple[str, ...] | None = None,
    runner: Runner | None = None,
    progress: CandidateProgress | None = None,
) -> list[ModelRow]:
    """Each model searched on the setting's device and ranked: those with a best configuration by its goodput per
    GPU (then its single-user speed), then the others in the order given."""
    rows = []
    for done, offered in enumerate(models):
        if progress is not None:
            progress(done, len(models), offered.name)
        rows.append(_row(offered, setting, context, engines, runner))
    if progress is not None:
        progress(len(models), len(models), "")
    ranked = sorted(
        (r for r in rows if r.best is not None),
        key=lambda r: (-(r.best.per_gpu_tok_s if r.best else 0.0), -(r.single_tok_s or 0.0), r.model.name),
    )
    return ranked + [r for r in rows if r.best is None]


def _row(
    offered: Offered, setting: Setting, context: int, engines: tuple[str, ...] | None, runner: Runner | None
) -> ModelRow:
    if offered.spec is None:
        return ModelRow(offered, reason=f"cannot be read: {offered.error}")
    try:
        advice = advise(replace(setting, model=offered.spec), context=context, engines=engines, runner=runner)
    except ServelabError as exc:
        return ModelRow(offered, reason=str(exc).splitlines()[0])
    if not advice.pareto.front:
        return ModelRow(offered, advice, reason=_why_none(advice))
    best = advice.pareto.front[0]
    plan = best.point.plan
    effective = None if setting.rates is None else setting.rates(plan)
    speculation = setting.speculation if best.point.speculative is not None else None
    engine = emulated_engine(plan, offered.spec, setting.gpu, rates=effective, speculation=speculation)
    single = emulate_level(
        engine, probe_config(setting.config, 1, closed=True), offered.spec.name, PromptPool()
    )
    return ModelRow(offered, advice, best, single)


def _why_none(advice: Advice) -> str:
    fitting = len(advice.judged) + len(advice.screened)
    if not fitting:
        first = advice.pruned[0].reason if advice.pruned else "no engine plans it"
        return f"does not fit ({len(advice.pruned)} configurations; e.g. {first})"
    return f"misses the SLO in all {fitting} configurations that fit"

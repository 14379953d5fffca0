"""`advise`: candidates -> prune (plan) -> search (predict) -> rank -> front. Pure apart from the clock it reads
for its own run time; `servelab advise` (cli/advise.py) parses, calls it and renders."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from servelab.advise.candidates import Pruned, advisable, grid
from servelab.advise.goal import Bound
from servelab.advise.judge import Demand, Judged, PromptPool, Setting, judge
from servelab.advise.rank import Verdict, pareto, ranked


@dataclass(frozen=True, kw_only=True)
class Advice:
    setting: Setting
    interconnect: str | None
    context: int
    candidates: int  # grid points planned
    pruned: tuple[Pruned, ...]
    judged: tuple[Judged, ...]  # every fitting point
    order: tuple[Judged, ...]  # those meeting the demand, best first
    verdict: Verdict
    seconds: float

    def to_json(self, confirmation: Any = None) -> dict[str, Any]:
        """The advice as `--json` prints it (and `servelab report --advice` reads it); `confirmation`: what
        `--confirm` measured (advise/confirm.py `Confirmation`)."""
        s = self.setting
        front = {id(j) for j in self.verdict.front}
        beaten = {id(loser): winner for loser, winner in self.verdict.dominated}
        return {
            "model": s.model.name, "gpu": s.gpu.name, "gpus": s.gpus, "interconnect": self.interconnect,
            "context": self.context, "slo": {b.key: b.limit_ms for b in s.bounds},
            "demand": {"users": s.demand.users, "rate": s.demand.rate},
            "prices": {"usd_per_gpu_hour": s.prices.gpu_hour, "usd_per_kwh": s.prices.kwh},
            "candidates": self.candidates, "seconds": round(self.seconds, 2),
            "front": [{**judged_json(j), "compose": _compose(j, s), "bands": figure_bands(j, s)}
                      for j in self.verdict.front],
            "ranked": [{**judged_json(j), "on_front": id(j) in front,
                        "dominated_by": beaten[id(j)].point.name if id(j) in beaten else None} for j in self.order],
            "missed": [judged_json(j) for j in self.judged if not j.meets],
            "pruned": [{"candidate": p.name, "reason": p.reason} for p in self.pruned],
            "confirmation": None if confirmation is None else confirmation.to_json(),
        }  # fmt: skip


def judged_json(j: Judged) -> dict[str, Any]:
    plan = j.point.plan
    return {
        "candidate": j.point.name, "engine": plan.engine, "quant": plan.quant, "kv_dtype": plan.kv_dtype,
        "tensor_parallel": plan.tensor_parallel, "parallel": j.point.parallel, "slots": plan.slots,
        "engine_words": list(j.point.variant.words), "searched": list(plan.searched),
        "capacity_per_replica": j.capacity.load, "lowest_failing_load": j.capacity.failing,
        "probes": j.capacity.probes, "replicas": j.replicas, "load_per_replica": j.load, "gpus_used": j.gpus_used,
        "output_tok_s": round(j.output_tok_s, 2), "output_tok_s_per_gpu": round(j.per_gpu_tok_s, 2),
        "ttft_p99_ms": j.p99("ttft_ms"), "tpot_p99_ms": j.p99("tpot_ms"),
        "usd_per_million_output_tokens": j.cost_per_mtok, "misses_beyond": list(j.failing_misses),
        "effective_figures": j.effective_source, "lost": j.lost or None, "command": plan.command_line,
    }  # fmt: skip


def figure_bands(j: Judged, setting: Setting) -> dict[str, list[float]] | None:
    """The goodput's error band (low, high) where its figures came from the corpus-fitted step model
    (predict/bands.py: `Pricing.band`, the cross-validation residuals of its regime at the load's batch); None
    for a calibration or the plan's figures, which carry no band. The corpus holds medians and throughputs, so
    the p99 latencies get none (as predict's levels)."""
    from servelab.predict.bands import scaled
    from servelab.predict.machine import price
    from servelab.predict.stepmodel import load_step_model

    if j.effective_source != "corpus" or j.load is None:
        return None
    pricing = price(j.point.plan, setting.gpu, setting.model, step_model=load_step_model())
    batch = int(j.load) if setting.demand.closed else j.point.plan.slots
    band = scaled(j.per_gpu_tok_s, pricing.band("output tok/s", max(1, batch)))
    return None if band is None else {"output_tok_s_per_gpu": [round(band[0], 2), round(band[1], 2)]}


def _compose(j: Judged, s: Setting) -> str:
    """The front member's compose service, as `servelab plan --emit compose` writes it."""
    from servelab.plan.emit import plan_compose

    plan = j.point.plan
    return plan_compose(plan, gpus=plan.tensor_parallel, compute_capability=s.gpu.compute_capability)


Progress = Callable[[int, int, str], None]  # (done, total, candidate name)


def advise(
    setting: Setting,
    *,
    context: int,
    interconnect: str | None = None,
    engines: tuple[str, ...] | None = None,
    variants: Any = None,
    progress: Progress | None = None,
) -> Advice:
    """Every configuration of the grid (candidates.py) planned, the fitting ones searched and ranked."""
    started = time.perf_counter()
    fitting, pruned = grid(
        setting.model, setting.gpu, gpus=setting.gpus, context=context, interconnect=interconnect,
        engines=advisable(engines), variants=variants, speculative=setting.speculative,
    )  # fmt: skip
    judged, pool = [], PromptPool()
    for done, point in enumerate(fitting):
        if progress is not None:
            progress(done, len(fitting), point.name)
        judged.append(judge(point, setting, pool))
    order = ranked(judged)
    return Advice(setting=setting, interconnect=interconnect, context=context, candidates=len(fitting) + len(pruned), pruned=tuple(pruned), judged=tuple(judged),
                  order=tuple(order), verdict=pareto(order), seconds=time.perf_counter() - started)  # fmt: skip


__all__ = ["Advice", "Bound", "Demand", "Setting", "advise"]

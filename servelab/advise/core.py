"""`advise`: candidates -> prune (plan) -> search (predict) -> rank -> front. Pure apart from the clock it reads
for its own run time; `servelab advise` (cli/advise.py) parses, calls it and renders."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from servelab.advise.candidates import GridPoint, Pruned, advisable, grid
from servelab.advise.goal import Bound
from servelab.advise.judge import (
    DEFAULT_MAX_USERS,
    Demand,
    Judged,
    PromptPool,
    Setting,
    probe_config,
    with_safe_load,
)
from servelab.advise.rank import LATENCY_METRICS, ParetoFront, objectives, pareto, point_front, ranked
from servelab.advise.screen import Best, best_case, dominated, slo_floor_misses
from servelab.advise.spread import Here, Runner, Task, chunked, with_figures
from servelab.model.dtypes import storage_dtype
from servelab.predict.machine import roofline
from servelab.predict.roofline import AchievedRates
from servelab.predict.stepmodel import load_step_model


@dataclass(frozen=True, kw_only=True)
class Advice:
    setting: Setting
    interconnect: str | None
    context: int
    candidates: int  # grid points planned
    pruned: tuple[Pruned, ...]
    judged: tuple[Judged, ...]  # every fitting point
    order: tuple[Judged, ...]  # those meeting the demand, best first
    pareto: ParetoFront
    seconds: float
    screened: tuple[Screened, ...] = ()  # fitting candidates the analytic screen left out (not emulated)
    emulated: int = 0  # candidates the emulator searched (twins of one emulation count once)

    def to_json(self, confirmation: Any = None) -> dict[str, Any]:
        """The advice as `--json` prints it (and `servelab report --advice` reads it); `confirmation`: what
        `--confirm` measured (advise/confirm.py `Confirmation`)."""
        s = self.setting
        front = {id(j) for j in self.pareto.front}
        beaten = {id(loser): winner for loser, winner in self.pareto.dominated}
        tied = {id(member): winner for member, winner in self.pareto.ties}
        return {
            "model": s.model.name,
            "gpu": s.gpu.name,
            "gpus": s.gpus,
            "interconnect": self.interconnect,
            "context": self.context,
            "slo": {b.key: b.limit_ms for b in s.bounds},
            "demand": {"users": s.demand.users, "rate": s.demand.rate},
            "prices": {"usd_per_gpu_hour": s.prices.gpu_hour, "usd_per_kwh": s.prices.kwh},
            "candidates": self.candidates,
            "emulated": self.emulated,
            "seconds": round(self.seconds, 2),
            "front": [
                {**judged_json(j), "compose": _compose(j, s), "within_band_of": _name(tied.get(id(j)))}
                for j in self.pareto.front
            ],
            "ranked": [
                {
                    **judged_json(j),
                    "on_front": id(j) in front,
                    "dominated_by": _name(beaten.get(id(j))),
                    "within_band_of": _name(tied.get(id(j))),
                }
                for j in self.order
            ],
            "missed": [judged_json(j) for j in self.judged if not j.meets],
            "screened": [{"candidate": p.name, "reason": p.reason} for p in self.screened],
            "pruned": [{"candidate": p.name, "reason": p.reason} for p in self.pruned],
            "confirmation": None if confirmation is None else confirmation.to_json(),
        }


def judged_json(j: Judged) -> dict[str, Any]:
    plan = j.point.plan
    return {
        "candidate": j.point.name,
        "engine": plan.engine,
        "quant": plan.quant,
        "kv_dtype": plan.kv_dtype,
        "tensor_parallel": plan.tensor_parallel,
        "parallel": j.point.parallel,
        "slots": plan.slots,
        "engine_words": list(j.point.variant.words),
        "searched": list(plan.searched),
        "capacity_per_replica": j.capacity.load,
        "lowest_failing_load": j.capacity.failing,
        "probes": j.capacity.probes,
        "replicas": j.replicas,
        "load_per_replica": j.load,
        "gpus_used": j.gpus_used,
        "output_tok_s": round(j.output_tok_s, 2),
        "output_tok_s_per_gpu": round(j.per_gpu_tok_s, 2),
        "ttft_p99_ms": j.p99("ttft_ms"),
        "tpot_p99_ms": j.p99("tpot_ms"),
        "usd_per_million_output_tokens": j.cost_per_mtok,
        "misses_beyond": list(j.failing_misses),
        "effective_figures": j.effective_source,
        "bands": figure_bands(j),
        "safe_at_load": j.safe_at_load if j.meets else None,
        "misses_at_band_edge": list(j.over_band),
        "safe_capacity_per_replica": None if j.safe is None else j.safe.load,
        "safe_lowest_failing_load": None if j.safe is None else j.safe.failing,
        "safe_replicas": j.safe_replicas,
        "lost": j.lost or None,
        "command": plan.command_line,
    }


def _name(j: Judged | None) -> str | None:
    return None if j is None else j.point.name


def figure_bands(j: Judged) -> dict[str, list[float]] | None:
    """The error bands (low, high) of a candidate's figures at its load, where the corpus-fitted step model priced
    them (advise/bands.py; None for a calibration's or the plan's figures, taken at their value): goodput per GPU
    and cost from the band of "output tok/s", each p99 from its median figure's band."""
    if j.bands is None or j.stats is None:
        return None
    out: dict[str, list[float]] = {}
    goodput = j.bands.goodput
    if goodput is not None:
        out["output_tok_s_per_gpu"] = [round(j.per_gpu_tok_s * f, 2) for f in goodput]
        if j.cost_per_mtok is not None and goodput[0] > 0:
            out["usd_per_million_output_tokens"] = [round(j.cost_per_mtok / f, 4) for f in reversed(goodput)]
    for metric in LATENCY_METRICS:
        value, tail = j.p99(metric), j.bands.tail(metric)
        if value is not None and tail is not None:
            out[f"{metric.removesuffix('_ms')}_p99_ms"] = [round(value * f, 1) for f in tail]
    return out or None


def _compose(j: Judged, s: Setting) -> str:
    """The front member's compose service, as `servelab plan --emit compose` writes it."""
    from servelab.plan.emit import plan_compose

    plan = j.point.plan
    return plan_compose(plan, gpus=plan.tensor_parallel, compute_capability=s.gpu.compute_capability)


CandidateProgress = Callable[[int, int, str], None]  # (done, total, candidate name)
WAVE_PER_WORKER = 4  # candidates emulated per worker between two dominance screens


@dataclass(frozen=True)
class Screened:
    """A fitting candidate the analytic screen (screen.py) left out, and why: a bound it cannot beat."""

    name: str
    reason: str


def advise(
    setting: Setting,
    *,
    context: int,
    interconnect: str | None = None,
    engines: tuple[str, ...] | None = None,
    variants: Any = None,
    progress: CandidateProgress | None = None,
    screen: bool = True,
    runner: Runner | None = None,
) -> Advice:
    """Every configuration of the grid (candidates.py) planned; the fitting ones screened by their bounds
    (screen.py, unless `screen` is off), the rest emulated (by `runner`: here, processes or Ray) in waves, best
    case first, each wave's results screening the next; then ranked."""
    started = time.perf_counter()
    fitting, pruned = grid(
        setting.model,
        setting.gpu,
        gpus=setting.gpus,
        context=context,
        interconnect=interconnect,
        engines=advisable(engines),
        variants=variants,
        speculative=setting.speculative,
    )
    search = _Search(setting, len(fitting), progress)
    run = runner or Here()
    try:
        search.run(with_figures(fitting, setting.rates), run, screen)
    finally:
        if runner is None:
            run.close()
    index: dict[str, int] = {}
    for k, p in enumerate(fitting):
        index.setdefault(p.name, k)
    judged = sorted(search.judged, key=lambda j: index.get(j.point.name, len(index)))  # the grid's order
    order = ranked(judged)
    found = pareto(order)
    # the front's safe loads, here (a bisection each: the front's only, to keep the search's speed)
    safe = {id(j): with_safe_load(j, setting, search.pool) for j in found.front}

    def now(j: Judged) -> Judged:
        return safe.get(id(j), j)

    return Advice(
        setting=setting,
        interconnect=interconnect,
        context=context,
        candidates=len(fitting) + len(pruned),
        pruned=tuple(pruned),
        judged=tuple(now(j) for j in judged),
        order=tuple(now(j) for j in order),
        pareto=ParetoFront(
            tuple(now(j) for j in found.front),
            tuple((a, now(b)) for a, b in found.dominated),
            tuple((now(a), now(b)) for a, b in found.ties),
        ),
        seconds=time.perf_counter() - started,
        screened=tuple(search.screened),
        emulated=search.emulated,
    )


class _Search:
    """The screen, then the emulations in waves (each wave's meeting candidates screen what is left)."""

    def __init__(self, setting: Setting, total: int, progress: CandidateProgress | None) -> None:
        self.setting, self.total, self.progress = setting, total, progress
        self.judged: list[Judged] = []
        self.screened: list[Screened] = []
        self.done = 0
        self.emulated = 0
        self.pool = PromptPool()
        self.step_model = load_step_model()

    def tick(self, name: str) -> None:
        self.done += 1
        if self.progress is not None:
            self.progress(self.done, self.total, name)

    def run(self, tasks: list[Task], run: Runner, screen: bool) -> None:
        """Screen, emulate in waves, then hand each twin (the same emulation) its original's verdict."""
        originals: dict[tuple[object, ...], Task] = {}
        twins: list[tuple[Task, Task]] = []
        for task in tasks:
            key = emulation_key(self.setting, *task)
            if key in originals:
                twins.append((task, originals[key]))
            else:
                originals[key] = task
        self.emulate(list(originals.values()), run, screen)
        verdicts = {j.point.name: j for j in self.judged}
        reasons = {s.name: s.reason for s in self.screened}
        for (twin, _), (original, _) in twins:
            if original.name in verdicts:
                self.judged.append(replace(verdicts[original.name], point=twin))
            else:
                self.screened.append(Screened(twin.name, reasons[original.name]))
            self.tick(twin.name)

    def emulate(self, tasks: list[Task], run: Runner, screen: bool) -> None:
        bests: dict[int, Best] = {}
        queue: list[Task] = []
        for task in tasks:
            best = self.best(task) if screen else None
            broken = slo_floor_misses(self.setting.bounds, best) if best is not None else ()
            if broken:
                self.screened.append(
                    Screened(task[0].name, "misses the SLO at every load: " + "; ".join(broken))
                )
                self.tick(task[0].name)
                continue
            if best is not None:
                bests[id(task[0])] = best
            queue.append(task)
        queue.sort(key=lambda t: -bests[id(t[0])].per_gpu_tok_s if id(t[0]) in bests else -math.inf)
        worker_setting = replace(self.setting, rates=None)
        wave = WAVE_PER_WORKER * run.workers
        while queue:
            now, queue = queue[:wave], queue[wave:]
            for results in run.run(worker_setting, chunked(now, run.workers)):
                for j in results:
                    self.judged.append(j)
                    self.emulated += 1
                    self.tick(j.point.name)
            if bests:
                queue = self.rescreen(queue, bests)

    def rescreen(self, queue: list[Task], bests: dict[int, Best]) -> list[Task]:
        """Drop the queued candidates whose best case an emulated one dominates. Only candidates without an error
        band weigh here, as rivals and as the screened: a band and its safe load are known only once emulated,
        and between figures without one the dominance is the point predictions' (rank.py)."""
        plain = [j for j in self.judged if j.bands is None]
        if not plain:
            return queue
        rivals = tuple((j.point.name, objectives(j)) for j in point_front(plain))
        keep = []
        for task in queue:
            best = None if self.banded(task) else bests.get(id(task[0]))
            winner = dominated(best, rivals) if best is not None else None
            if winner is None:
                keep.append(task)
                continue
            self.screened.append(
                Screened(task[0].name, f"dominated by {winner} (its best case; not emulated)")
            )
            self.tick(task[0].name)
        return keep

    def banded(self, task: Task) -> bool:
        """Whether `task` may be priced by the corpus fit, whose figures carry bands (judge.py `Prober`)."""
        return task[1] is None and self.step_model is not None and not self.setting.gpu.is_cpu

    def best(self, task: Task) -> Best | None:
        return candidate_best(self.setting, task[0], task[1], self.pool)


def emulation_key(setting: Setting, point: GridPoint, effective: AchievedRates | None) -> tuple[object, ...]:
    """What `judge` reads of a candidate (predict/machine.py's roofline and scheduler, the speculation): two
    candidates with the same key are the same emulation (vLLM's fp8 and fp8_e5m2 KV caches store alike)."""
    plan = point.plan
    return (
        plan.engine,
        plan.quant,
        storage_dtype(plan.kv_dtype, setting.model.dtype),
        plan.tensor_parallel,
        plan.slots,
        plan.context_served or plan.context,
        plan.context,
        json.dumps(plan.details, sort_keys=True, default=str),
        tuple(sorted(plan.efficiency.items())),
        plan.parallel_cost.interconnect if plan.parallel_cost else None,
        plan.memory_bytes.recurrent_state > 0,
        effective,
        point.speculative,
    )


def candidate_best(
    setting: Setting, point: GridPoint, effective: AchievedRates | None, pool: PromptPool
) -> Best | None:
    """`point`'s best case (screen.py) for the setting's demand; None for a speculative one (several tokens a
    step). Open loop, the goodput bound is the rate times the longest output of the probe's prompts."""
    if point.speculative is not None:
        return None
    s, plan = setting, point.plan
    rate_tokens = None
    if not s.demand.closed:
        probe = probe_config(s.config, float(s.demand.rate or 1.0), closed=False)
        prompts = pool.prompts(probe, plan.context_served or plan.context)
        rate_tokens = float(s.demand.rate or 1.0) * max(p.output_tokens for p in prompts)
    return best_case(
        point,
        roofline(plan, s.model, s.gpu, effective),
        users=float(s.demand.users or DEFAULT_MAX_USERS),
        rate_tokens=rate_tokens,
        prices=s.prices,
        board_w=s.gpu.tdp_w,
    )


__all__ = ["Advice", "Bound", "Demand", "Screened", "Setting", "advise"]

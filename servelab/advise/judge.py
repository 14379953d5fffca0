"""Each fitting configuration judged in virtual time: its highest load within the SLOs, the replicas the demand
needs, and the goodput and cost there.

A probe is one `predict` level (predict/virtual_ladder.py, the same emulator and statistics as `servelab predict`) at a
load per replica: `users` closed-loop clients, or `rate` requests/s open loop. The demand (`--users N` /
`--rate R`) bounds the search: at most all of it on one replica, at least its share over every replica the GPUs
hold (each `tp` GPUs; failing that share, the configuration misses). The replicas used are the fewest that carry
the demand at the capacity found. Without a demand the search runs from 1 to DEFAULT_MAX_USERS users per replica
and every replica that fits is used.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from servelab.advise.candidates import GridPoint
from servelab.advise.goal import Bound, Prices, cost_per_million, misses
from servelab.advise.search import Capacity, highest_passing
from servelab.bench.config import BenchConfig
from servelab.bench.level_counts import prompt_count
from servelab.bench.schedule import StopRule
from servelab.bench.workloads import Prompt, build_prompts
from servelab.hardware.gpus import GPU
from servelab.model.spec import ModelSpec
from servelab.predict.machine import EmulatedEngine, emulated_engine
from servelab.predict.roofline import AchievedRates
from servelab.predict.virtual_ladder import predict_ladder
from servelab.predict.words import WordTokenizer
from servelab.results.stats import LevelStats
from servelab.scheduling.core import Speculation
from servelab.sizing.fit import Speculative
from servelab.sizing.types import Plan

DEFAULT_MAX_USERS = 64  # per replica, when no --users demand caps the search
MIN_PROBE_REQUESTS = (
    64  # measured requests per probe: enough for the p99 to be more than the maximum of a few
)
REQUESTS_PER_USER = 4  # closed loop: each user sends this many measured requests, at least


@dataclass(frozen=True)
class Demand:
    """The load to carry in all: `users` closed-loop clients, or `rate` requests/s open loop; neither: as much
    as the GPUs carry within the SLOs (closed loop)."""

    users: int | None = None
    rate: float | None = None

    @property
    def closed(self) -> bool:
        return self.rate is None

    def unit(self) -> str:
        return "users" if self.closed else "req/s"


@dataclass(frozen=True, kw_only=True)
class Judged:
    """One fitting configuration after the search. `capacity` per replica; `replicas` used (None: the demand needs
    more than the GPUs hold, or nothing passed); `stats` the level at `load` per replica; `failing_misses` the
    SLOs broken at the lowest failing load."""

    point: GridPoint
    capacity: Capacity
    replicas: int | None
    load: float | None
    stats: LevelStats | None
    failing_misses: tuple[str, ...]
    output_tok_s: float = 0.0  # the deployment's, all replicas
    gpus_used: int = 0
    cost_per_mtok: float | None = None
    effective_source: str = "plan"
    lost: str = ""  # why it is not advised (empty: it meets the demand)

    @property
    def meets(self) -> bool:
        return not self.lost

    @property
    def per_gpu_tok_s(self) -> float:
        return self.output_tok_s / self.gpus_used if self.gpus_used else 0.0

    def p99(self, metric: str) -> float | None:
        return None if self.stats is None else getattr(self.stats, metric).p99


@dataclass(frozen=True, kw_only=True)
class Setting:
    """What every judgement shares."""

    model: ModelSpec
    gpu: GPU
    gpus: int
    bounds: tuple[Bound, ...]
    demand: Demand
    prices: Prices
    config: BenchConfig  # the workload and its options; levels, rate and stop are set per probe
    rates: Callable[[Plan], AchievedRates | None] | None = None  # a calibration profile's figures, if any
    speculative: Speculative | None = (
        None  # speculative decoding to plan as well (the user gave an acceptance)
    )
    speculation: Speculation | None = None  # ... and how the emulator prices it (scheduling/core.py)


def probe_config(config: BenchConfig, load: float, closed: bool) -> BenchConfig:
    """`config` as one level at `load` per replica."""
    if closed:
        users = int(load)
        return replace(
            config,
            concurrency=(users,),
            rate=None,
            search=None,
            stop=StopRule(requests=max(MIN_PROBE_REQUESTS, REQUESTS_PER_USER * users)),
        )
    return replace(config, rate=load, search=None, stop=StopRule(requests=MIN_PROBE_REQUESTS))


class PromptPool:
    """The workload's prompts built once per (served context, count) and one tokenizer for every probe: building and
    first tokenizing them was a third of a probe's time."""

    def __init__(self) -> None:
        self.tokenizer = WordTokenizer()
        self._built: dict[tuple[int, int], list[Prompt]] = {}

    def prompts(self, config: BenchConfig, context: int) -> list[Prompt]:
        key = (context, prompt_count(config))
        if key not in self._built:
            self._built[key] = build_prompts(config.workload, key[1], self.tokenizer, context)
        return self._built[key]


def emulate_level(engine: EmulatedEngine, config: BenchConfig, model: str, pool: PromptPool) -> LevelStats:
    """One predicted level's statistics (the first level of `config`)."""
    prompts = pool.prompts(config, engine.context)
    result, _ = predict_ladder(engine, config, prompts, pool.tokenizer, label="advise", model=model)
    return result.targets[0].levels[0].stats


def judge(point: GridPoint, setting: Setting, pool: PromptPool | None = None) -> Judged:
    """`point`'s capacity per replica, the replicas the demand needs, and its figures at the load it carries."""
    plan = point.plan
    speculation = setting.speculation if point.speculative is not None else None
    engine = emulated_engine(
        plan, setting.model, setting.gpu, rates=_rates(setting, plan), speculation=speculation
    )
    demand, tp = setting.demand, plan.tensor_parallel
    levels: dict[float, LevelStats] = {}
    shared = pool or PromptPool()

    def at(load: float) -> LevelStats:
        if load not in levels:
            config = probe_config(setting.config, load, demand.closed)
            levels[load] = emulate_level(engine, config, setting.model.name, shared)
        return levels[load]

    def passes(load: float) -> bool:
        return not misses(setting.bounds, at(load))

    most = setting.gpus // tp
    if demand.closed:
        users = demand.users
        floor = 1 if users is None else math.ceil(users / most)
        capacity = highest_passing(floor, users or DEFAULT_MAX_USERS, passes, whole=True)
    else:
        cap = float(demand.rate or 1.0)
        capacity = highest_passing(cap / most, cap, passes, whole=False)
    broken = misses(setting.bounds, at(capacity.failing)) if capacity.failing is not None else ()
    base = Judged(
        point=point,
        capacity=capacity,
        replicas=None,
        load=None,
        stats=None,
        failing_misses=broken,
        effective_source=engine.roofline.rates.source,
    )
    if capacity.load is None:
        spread = f" per replica (the demand over all {most} replicas)" if most > 1 else ""
        return replace(
            base, lost=f"misses the SLO from {_load(capacity.failing, demand)}{spread}: {'; '.join(broken)}"
        )
    total = float(demand.users) if demand.users is not None else demand.rate
    replicas = most if total is None else min(most, math.ceil(total / capacity.load - 1e-9))
    load = capacity.load if total is None else _share(total, replicas, demand)
    stats = at(load)
    served = replicas if total is None else total / load  # replicas' worth of load actually carried
    output = level_output_tok_s(stats, load, demand.closed) * served
    gpus = replicas * tp
    cost = cost_per_million(setting.prices.per_hour(gpus, setting.gpu.tdp_w), output)
    return replace(
        base,
        replicas=replicas,
        load=load,
        stats=stats,
        output_tok_s=output,
        gpus_used=gpus,
        cost_per_mtok=cost,
    )


def level_output_tok_s(stats: LevelStats, load: float, closed: bool) -> float:
    """Output tokens/s one replica makes at `load`: closed loop, the level's aggregate throughput (its steady
    window, bench/metrics.py); open loop, the rate times the mean output, since a level within its SLOs keeps up
    with its arrivals (a short open-loop level's steady window can be a few milliseconds wide)."""
    if closed:
        return stats.output_tok_s
    return load * stats.tokens.output / stats.completed if stats.completed else 0.0


def _rates(setting: Setting, plan: Plan) -> AchievedRates | None:
    return None if setting.rates is None else setting.rates(plan)


def _share(total: float, replicas: int, demand: Demand) -> float:
    """One replica's share of the demand (whole users, rounded up)."""
    return float(math.ceil(total / replicas - 1e-9)) if demand.closed else total / replicas


def _load(load: float | None, demand: Demand) -> str:
    if load is None:
        return "no load"
    return f"{load:g} {demand.unit()}" if not demand.closed else f"{int(load)} users"

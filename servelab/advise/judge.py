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

from servelab.advise.bands import Bands, level_bands, over_band
from servelab.advise.candidates import GridPoint
from servelab.advise.goal import Bound, Prices, cost_per_million, misses
from servelab.advise.search import Capacity, highest_passing
from servelab.bench.config import BenchConfig
from servelab.bench.level_counts import prompt_count
from servelab.bench.schedule import StopRule
from servelab.bench.workloads import Prompt, build_prompts
from servelab.hardware.gpus import GPU
from servelab.model.spec import ModelSpec
from servelab.predict.machine import EmulatedEngine, emulated_engine, price
from servelab.predict.roofline import AchievedRates
from servelab.predict.stepmodel import load_step_model
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
    bands: Bands | None = None  # the error bands of `stats`' figures (None: taken at their value)
    over_band: tuple[str, ...] = ()  # the SLOs broken at the bands' upper edge (empty: safe at `load`)
    safe: Capacity | None = None  # the safe load search (with_safe_load: the front's; None: not searched)
    safe_replicas: int | None = None  # the replicas the demand needs at the safe load (None: none is safe)

    @property
    def meets(self) -> bool:
        return not self.lost

    @property
    def safe_at_load(self) -> bool:
        """It meets the demand with its latencies at their bands' upper edge too."""
        return self.meets and not self.over_band

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


class Prober:
    """One configuration's emulated engine, priced as `servelab predict` prices it (a calibration's figures, else
    the corpus-fitted step model's with its bands, else the plan's), and the levels probed so far, by load per
    replica."""

    def __init__(self, point: GridPoint, setting: Setting, pool: PromptPool | None = None) -> None:
        plan = point.plan
        effective = _rates(setting, plan)
        self.pricing = (
            None
            if effective is not None
            else price(plan, setting.gpu, setting.model, step_model=load_step_model())
        )
        speculation = setting.speculation if point.speculative is not None else None
        self.engine = emulated_engine(
            plan,
            setting.model,
            setting.gpu,
            rates=effective,
            speculation=speculation,
            pricing=self.pricing,
        )
        self.setting, self.pool = setting, pool or PromptPool()
        self.levels: dict[float, LevelStats] = {}

    def at(self, load: float) -> LevelStats:
        if load not in self.levels:
            config = probe_config(self.setting.config, load, self.setting.demand.closed)
            self.levels[load] = emulate_level(self.engine, config, self.setting.model.name, self.pool)
        return self.levels[load]

    def passes(self, load: float) -> bool:
        return not misses(self.setting.bounds, self.at(load))

    def passes_safely(self, load: float) -> bool:
        """The SLOs met at `load` on the point prediction and at the bands' upper edge."""
        stats = self.at(load)
        return not misses(self.setting.bounds, stats) and not over_band(
            self.setting.bounds, stats, level_bands(self.pricing, stats)
        )


def load_range(setting: Setting, tp: int) -> tuple[float, float]:
    """(floor, cap) of the search per replica: the demand's least share over every replica the GPUs hold, all of
    it on one."""
    demand, most = setting.demand, setting.gpus // tp
    if demand.closed:
        users = demand.users
        return (1 if users is None else math.ceil(users / most)), users or DEFAULT_MAX_USERS
    cap = float(demand.rate or 1.0)
    return cap / most, cap


def judge(point: GridPoint, setting: Setting, pool: PromptPool | None = None) -> Judged:
    """`point`'s capacity per replica, the replicas the demand needs, and its figures (with their bands) at the
    load it carries."""
    plan = point.plan
    probe = Prober(point, setting, pool)
    demand, tp = setting.demand, plan.tensor_parallel
    most = setting.gpus // tp
    floor, cap = load_range(setting, tp)
    capacity = highest_passing(floor, cap, probe.passes, whole=demand.closed)
    broken = misses(setting.bounds, probe.at(capacity.failing)) if capacity.failing is not None else ()
    base = Judged(
        point=point,
        capacity=capacity,
        replicas=None,
        load=None,
        stats=None,
        failing_misses=broken,
        effective_source=probe.engine.roofline.rates.source,
    )
    if capacity.load is None:
        spread = f" per replica (the demand over all {most} replicas)" if most > 1 else ""
        return replace(
            base, lost=f"misses the SLO from {_load(capacity.failing, demand)}{spread}: {'; '.join(broken)}"
        )
    replicas = replicas_for(setting, capacity.load, tp)
    total = float(demand.users) if demand.users is not None else demand.rate
    load = capacity.load if total is None else _share(total, replicas, demand)
    stats = probe.at(load)
    served = replicas if total is None else total / load  # replicas' worth of load actually carried
    output = level_output_tok_s(stats, load, demand.closed) * served
    gpus = replicas * tp
    cost = cost_per_million(setting.prices.per_hour(gpus, setting.gpu.tdp_w), output)
    bands = level_bands(probe.pricing, stats)
    return replace(
        base,
        replicas=replicas,
        load=load,
        stats=stats,
        output_tok_s=output,
        gpus_used=gpus,
        cost_per_mtok=cost,
        bands=bands,
        over_band=over_band(setting.bounds, stats, bands),
    )


def replicas_for(setting: Setting, capacity: float, tp: int) -> int:
    """The fewest replicas that carry the demand at `capacity` per replica (a capacity the search found is at
    least the demand's share over every replica the GPUs hold); every replica they hold without a demand."""
    most = setting.gpus // tp
    total = float(setting.demand.users) if setting.demand.users is not None else setting.demand.rate
    return most if total is None else min(most, math.ceil(total / capacity - 1e-9))


def with_safe_load(j: Judged, setting: Setting, pool: PromptPool | None = None) -> Judged:
    """`j` with its safe load per replica: the highest whose SLOs hold at the bands' upper edge too (the same
    bisection as the capacity, between the demand's least share and the capacity), and the replicas the demand
    needs there. A configuration without a band is taken at its value: its safe load is its capacity."""
    if j.load is None or j.capacity.load is None:
        return j
    if j.bands is None:
        return replace(j, safe=j.capacity, safe_replicas=j.replicas)
    probe = Prober(j.point, setting, pool)
    floor, _ = load_range(setting, j.point.plan.tensor_parallel)
    safe = highest_passing(floor, j.capacity.load, probe.passes_safely, whole=setting.demand.closed)
    replicas = None if safe.load is None else replicas_for(setting, safe.load, j.point.plan.tensor_parallel)
    return replace(j, safe=safe, safe_replicas=replicas)


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

"""The configurations `servelab advise` weighs, and the planner's verdict on each (pure: a ModelSpec and a GPU in).

The grid: every engine the registry can both plan and emulate (its `Planner` and its `scheduler`) x the weight
formats `plan` compares for it (`plan.make.candidates`: the checkpoint's own, then its usual ones) x the KV
dtypes its planner tries (`Planner.kv_dtypes`) x tensor parallelism in powers of two up to the GPUs (replicas
take the rest) x a few batch limits (`PlanSettings.parallel`, which each engine's planner turns into its own
knob: llama.cpp's slots, vLLM's running sequences, sglang's running requests). `--variant ENGINE WORDS` adds the
engine's own flags, read by its command-line reader, as one more axis. Each point is one `make_plan` through
`compare_plans` (which also applies the engine's own fixes for its refusals); what does not fit is pruned with the
planner's reason.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import product

from servelab.engines import registry
from servelab.engines.base import Engine
from servelab.errors import ConfigError
from servelab.hardware.gpus import GPU
from servelab.model.spec import ModelSpec
from servelab.plan.make import compare_plans
from servelab.sizing.fit import Speculative
from servelab.sizing.types import Plan

BATCH_LIMITS = (1, 4, 16)  # PlanSettings.parallel: 1 is each engine's own default (llama.cpp: one slot)


@dataclass(frozen=True)
class Variant:
    """The engine's own settings for one axis point: `words` as the user gave them (empty: its defaults) and the
    Settings value its reader made of them."""

    engine: str
    words: tuple[str, ...] = ()
    settings: object = None


@dataclass(frozen=True)
class GridPoint:
    """One point of the grid and its plan; `name` identifies it in messages and JSON."""

    plan: Plan
    parallel: int
    variant: Variant = field(default_factory=lambda: Variant(""))
    speculative: Speculative | None = None  # speculative decoding as planned (its draft's memory, the flags)

    @property
    def name(self) -> str:
        words = f" [{' '.join(self.variant.words)}]" if self.variant.words else ""
        if self.speculative is not None:
            words += f" spec={self.speculative.method}/{self.speculative.num_tokens}"
        searched = f" ({', '.join(self.plan.searched)})" if self.plan.searched else ""
        return (
            f"{self.plan.engine} {self.plan.quant} kv={self.plan.kv_dtype} tp={self.plan.tensor_parallel}"
            f" slots={self.plan.slots}{words}{searched}"
        )


@dataclass(frozen=True)
class Pruned:
    """A grid point the planner turned down (or could not plan): what it was, and why, in the planner's words."""

    name: str
    reason: str


def advisable(engines: Sequence[str] | None = None) -> tuple[Engine, ...]:
    """The engines advise can weigh: planned and emulated (all of them, or those named)."""
    chosen = (
        registry.planned()
        if engines is None
        else tuple(registry.get_engine(e, registry.planned()) for e in engines)
    )
    out = tuple(e for e in chosen if e.scheduler is not None and e.planner is not None)
    if not out:
        raise ConfigError(
            f"servelab cannot emulate {', '.join(e.name for e in chosen)}; advise needs a scheduler model"
        )
    return out


def tensor_parallel_sizes(gpus: int) -> tuple[int, ...]:
    """1, 2, 4 … up to `gpus`: the group sizes engines accept (a power of two dividing the heads in practice)."""
    sizes, tp = [], 1
    while tp <= gpus:
        sizes.append(tp)
        tp *= 2
    return tuple(sizes)


def grid(
    model: ModelSpec,
    gpu: GPU,
    *,
    gpus: int,
    context: int,
    interconnect: str | None,
    engines: tuple[Engine, ...],
    variants: Mapping[str, tuple[Variant, ...]] | None = None,
    batch_limits: tuple[int, ...] = BATCH_LIMITS,
    speculative: Speculative | None = None,
) -> tuple[list[GridPoint], list[Pruned]]:
    """Every grid point planned: those that fit, and those pruned with the planner's reason; with `speculative`,
    each point also with it (the user gave an acceptance to predict it with)."""
    fitting: list[GridPoint] = []
    pruned: list[Pruned] = []
    seen: set[tuple[object, ...]] = set()
    speculations = (None,) if speculative is None else (None, speculative)
    for engine in engines:
        rules = engine.planner
        if rules is None:  # advisable() keeps planned engines only
            continue
        for variant in (Variant(engine.name), *(variants or {}).get(engine.name, ())):
            for tp in tensor_parallel_sizes(gpus):
                for parallel, kv, spec in product(batch_limits, rules.kv_dtypes or (None,), speculations):
                    where = f"{engine.name} kv={kv} tp={tp} parallel={parallel}" + (
                        f" spec={spec.method}" if spec else ""
                    )
                    try:
                        plans = compare_plans(
                            model,
                            gpu,
                            engines=(engine.name,),
                            gpus=tp,
                            interconnect=interconnect if tp > 1 else None,
                            engine_settings={engine.name: variant.settings}
                            if variant.settings is not None
                            else None,
                            context=context,
                            parallel=parallel,
                            kv_dtype=kv,
                            speculative=spec,
                        ).plans
                    except ConfigError as exc:
                        pruned.append(Pruned(where, str(exc)))
                        continue
                    for plan in plans:
                        point = GridPoint(plan, parallel, variant, spec)
                        key = (point.name, plan.slots, plan.command_line)
                        if key in seen:
                            continue
                        seen.add(key)
                        if plan.fits:
                            fitting.append(point)
                        else:
                            pruned.append(Pruned(point.name, _reason(plan)))
    return fitting, pruned


def _reason(plan: Plan) -> str:
    if plan.refusals:
        return plan.refusals[0]
    memory = plan.memory_bytes
    return f"needs {memory.total / 2**30:.1f} GiB of {memory.capacity / 2**30:.1f} GiB per GPU"

"""The emulated engine a plan describes: its roofline figures per GPU and its scheduler, from the same
planner arithmetic `servelab plan` uses (sizing/speed.py, kv.py, state.py, parallel.py) and the plan's figures
(efficiency, KV pool, slots, batch sizes: `Plan.details`, read back as the engine's own typed `Figures`).

`AchievedRates` starts as the card's peak x the plan's sourced efficiency (decode: bandwidth, prefill: compute);
a calibration profile passes its own `AchievedRates` instead (docs/predict.md).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

from servelab.engines import registry
from servelab.errors import ConfigError
from servelab.hardware.gpus import GPU, default_interconnect
from servelab.model.dtypes import storage_dtype
from servelab.model.spec import ModelSpec
from servelab.plan.make import all_reduces, compute_dtype, planner_engine, sequence_state_bytes, with_quant
from servelab.predict.roofline import AchievedRates, Roofline
from servelab.predict.stepmodel import load_step_model, regime
from servelab.scheduling.core import EngineSetup, Scheduler, Speculation
from servelab.sizing import speed
from servelab.sizing.kv import kv_layout
from servelab.sizing.parallel import tensor_parallel_cost
from servelab.sizing.types import Plan
from servelab.sizing.weights import active_params, output_head_params


@dataclass(frozen=True)
class EmulatedEngine:
    """Everything one emulation needs: a fresh scheduler per level, the step prices, the served context."""

    engine: str
    new_scheduler: Callable[[], Scheduler]
    roofline: Roofline
    context: int
    speculation: Speculation | None = None


def plan_rates(plan: Plan, gpu: GPU, model: ModelSpec) -> AchievedRates:
    """The GPU step model's figures where a fit ships (servelab/predict/stepmodel.json); else the planner's:
    peak bandwidth x decode efficiency, peak tensor FLOP/s x prefill efficiency; on a CPU, for an engine whose batched passes take another path, those passes at the same bandwidth (until a
    calibration measures theirs)."""
    fitted = None if gpu.is_cpu else load_step_model()
    if fitted is not None:  # the GPU step model fitted to the public corpus (docs/predict.md), when one ships
        return fitted.rates(regime(plan.engine, gpu, plan.quant), gpu, _priced(model, plan.quant).num_layers)
    decode, prefill = plan.efficiency.get("decode", 1.0), plan.efficiency.get("prefill", 1.0)
    flops = gpu.tensor_flops(compute_dtype(model, gpu))
    bandwidth = gpu.bandwidth_bytes_s * decode
    batched = bandwidth if gpu.is_cpu and registry.get_engine(plan.engine).cpu_batched_path else None
    return AchievedRates(
        bandwidth_bytes_s=bandwidth, flops_s=flops * prefill, source="plan", batched_bandwidth_bytes_s=batched
    )


def roofline(plan: Plan, model: ModelSpec, gpu: GPU, rates: AchievedRates | None = None) -> Roofline:
    """One tensor-parallel rank's figures: engines that all-reduce split weights, KV heads and state by the
    GPUs and pay the all-reduces (sizing/parallel.py); llama.cpp's layer split runs the layers one GPU after
    another, so a step costs what it would on one card."""
    engine = planner_engine(plan.engine)
    model = _priced(model, plan.quant)
    tp = plan.tensor_parallel
    split = tp > 1 and all_reduces(engine)
    share = 1 / tp if split else 1.0
    kv = kv_layout(model, storage_dtype(plan.kv_dtype, model.dtype), tp=tp if split else 1)
    full, sliding = speed.attention_width(model)

    def weights(tokens: int) -> float:
        return speed.weight_read_bytes(model, max(1, tokens)) * share

    registered = registry.get_engine(plan.engine)
    attention_apart = (registered.cpu_decode_attention or 0.0) if gpu.is_cpu else 0.0
    allreduce: Callable[[int], float] = _no_allreduce
    if split:
        link = plan.parallel_cost.interconnect if plan.parallel_cost else default_interconnect(gpu)
        allreduce = functools.partial(_allreduce_s, model, gpu, tp, link)
    return Roofline(
        weight_bytes=functools.lru_cache(maxsize=4096)(weights),
        kv_full_bytes_per_token=kv.full_bytes_per_token,
        kv_sliding_bytes_per_token=kv.sliding_bytes_per_token,
        sliding_window=kv.window,
        state_bytes=sequence_state_bytes(model, engine) * share,
        flops_per_token=2 * active_params(model) * share,
        head_flops_per_token=2 * output_head_params(model) * share,
        attention_width_full=full * share,
        attention_width_sliding=sliding * share,
        rates=rates or plan_rates(plan, gpu, model),
        allreduce_s=allreduce,
        decode_attention_ratio=attention_apart,
    )


def emulated_engine(
    plan: Plan,
    model: ModelSpec,
    gpu: GPU,
    *,
    rates: AchievedRates | None = None,
    speculation: Speculation | None = None,
) -> EmulatedEngine:
    """The engine of `plan` as the emulator runs it; ConfigError when servelab has no model of its scheduler."""
    engine = registry.get_engine(plan.engine)
    if engine.scheduler is None:
        emulated = ", ".join(e.name for e in registry.engines() if e.scheduler is not None)
        raise ConfigError(f"servelab cannot emulate {engine.label}'s scheduler; predict {emulated}")
    make = engine.scheduler
    hybrid = plan.memory_bytes.recurrent_state > 0 or sequence_state_bytes(model, engine) > 0
    context = plan.context_served or plan.context
    planner = engine.planner
    if planner is None:
        raise ConfigError(f"servelab has no plan figures for {engine.label}; predict needs its planner")
    figures = planner.figures_type.from_json(plan.details, f"the {engine.label} plan's details")
    setup = EngineSetup(figures, max(1, plan.slots), context, hybrid, speculation)
    return EmulatedEngine(
        engine.name,
        functools.partial(make, setup),
        roofline(plan, model, gpu, rates),
        context,
        speculation,
    )


def _priced(model: ModelSpec, quant: str) -> ModelSpec:
    if model.quant.lower() == quant.lower() or model.weights_exact:
        return model
    return with_quant(model, quant)


def _no_allreduce(tokens: int) -> float:
    return 0.0


@functools.lru_cache(maxsize=4096)
def _allreduce_s(model: ModelSpec, gpu: GPU, tp: int, link: str, tokens: int) -> float:
    return tensor_parallel_cost(model, gpu, tp, link, batch=tokens).per_token_s

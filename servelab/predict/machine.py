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
from servelab.predict.bands import Pricing, Provenance
from servelab.predict.profiles import Profile, stale_reason
from servelab.predict.roofline import AchievedRates, Roofline
from servelab.predict.stepmodel import StepModel, load_step_model, regime
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
    pricing: Pricing | None = None  # where the step prices came from and their bands (None: given figures)


def plan_rates(plan: Plan, gpu: GPU, model: ModelSpec) -> AchievedRates:
    """The figures a step is priced with, the calibration aside: the GPU step model's where a fit ships
    (servelab/predict/stepmodel.json, or $SERVELAB_STEP_MODEL), else the planner's (`price`)."""
    return price(plan, gpu, model, step_model=load_step_model()).rates


def price(
    plan: Plan,
    gpu: GPU,
    model: ModelSpec,
    *,
    profile: Profile | None = None,
    step_model: StepModel | None = None,
) -> Pricing:
    """One truth for `predict` and `plan`: the figures a plan's steps are priced with and where they came from,
    first found of: this machine's calibration `profile` (stale when it measured another release than the
    plan's), the corpus-fitted `step_model` (GPUs only: the CPU device is this machine's to calibrate), the
    plan's own sourced efficiencies."""
    version = plan.details.get("engine_version")
    if profile is not None:
        detail = f"{profile.name}, {profile.created[:10]} (fit R2 {profile.fit.get('r2', float('nan')):.3f})"
        stale = stale_reason(profile, version if isinstance(version, str) else None)
        return Pricing(profile.rates, Provenance("calibration", detail, stale), None, plan.engine)
    if step_model is not None and not gpu.is_cpu:
        from servelab.predict.corpus.load import gpu_class

        layers = _priced(model, plan.quant).num_layers
        note = step_model.provenance.get("note") or step_model.provenance.get("source")
        detail = "the GPU step model fitted to the public corpus" + (f" ({note})" if note else "")
        return Pricing(
            step_model.rates(regime(plan.engine, gpu, plan.quant), gpu, layers),
            Provenance("corpus", detail),
            step_model,
            plan.engine,
            gpu_class(gpu),
        )
    why = (
        "this CPU has no calibration profile; the corpus fit is for GPUs"
        if gpu.is_cpu
        else "no step model fitted"
    )
    detail = f"the plan's sourced efficiencies ({why})"
    return Pricing(planner_rates(plan, gpu, model), Provenance("plan", detail), None, plan.engine)


def planner_rates(plan: Plan, gpu: GPU, model: ModelSpec) -> AchievedRates:
    """Peak bandwidth x the plan's decode efficiency, peak tensor FLOP/s x its prefill efficiency; on a CPU, for
    an engine whose batched passes take another path, those passes at the same bandwidth (until a calibration
    measures theirs)."""
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
    pricing: Pricing | None = None,
) -> EmulatedEngine:
    """The engine of `plan` as the emulator runs it, its steps priced by `pricing` (else `rates`, else
    `plan_rates`); ConfigError when servelab has no model of its scheduler."""
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
        roofline(plan, model, gpu, pricing.rates if pricing is not None else rates),
        context,
        speculation,
        pricing,
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

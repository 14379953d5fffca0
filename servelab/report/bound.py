"""Power and the bound: was serving bandwidth-bound or compute/power-bound? Pure assembly for the bill.

Three inputs, each from its own place: serving power from the run's stored "gpu_power" samples (taken by
`servelab bench` during its levels; those of the single-stream level when the samples say their level, see
`report/power_levels.py`), full-compute power from the burn in `servelab doctor --burn --json`
(its "burn" object), and achieved bandwidth = bytes per token × the measured single-stream decode tok/s,
where bytes per token = the card's bandwidth / the plan's memory-bound short-context decode ceiling. The
verdict itself is `servelab.diagnose.bound.analyse_bound`. Whatever is missing becomes a note naming the
flag that supplies it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from servelab.diagnose.bound import BoundAnalysis, analyse_bound
from servelab.errors import ConfigError
from servelab.hardware.gpus import find_gpu
from servelab.plan.saved import SavedCeilings, SavedPlan
from servelab.report.data import Bill, EngineSummary, as_number
from servelab.report.power_levels import LevelPower, ServingPower, readings, serving_power
from servelab.report.tables import TableData, fmt


@dataclass(frozen=True)
class BoundInputs:
    """What every engine of the bill shares: the burn's power, the card's bandwidth, bytes per token."""

    burn_power_w: float | None
    bandwidth_gb_s: float | None
    bytes_per_token: float | None
    notes: tuple[str, ...]  # what is missing and which flag supplies it


@dataclass(frozen=True, kw_only=True)
class EngineBound:
    label: str
    analysis: BoundAnalysis
    samples: int  # power samples the serving power is the mean of
    gpus: tuple[int, ...]  # the GPUs those samples are from
    notes: tuple[str, ...]
    power_level: str | None = None  # the level those samples are from (None: all levels)
    levels: tuple[LevelPower, ...] = ()  # power and energy per output token, per level with samples

    @property
    def has_numbers(self) -> bool:
        a = self.analysis
        return any(
            v is not None
            for v in (a.serving_power_w, a.burn_power_w, a.achieved_bandwidth_gb_s, a.bandwidth_gb_s)
        )


def burn_power(doctor: dict | None) -> tuple[float | None, str | None]:
    """The burn's full-compute power (W) from doctor's JSON, or a note saying how to get it."""
    how = "run `servelab doctor --burn --json` on the GPU machine and pass it with --doctor FILE"
    if doctor is None:
        return None, f"No full-compute power: {how}."
    burn = doctor.get("burn")
    if not isinstance(burn, dict):
        return None, f"The doctor file has no burn: {how}."
    power = as_number(burn.get("power_w"))
    if burn.get("status") != "ok" or power is None or power <= 0:
        reason = str(burn.get("reason") or "no power reading")
        return None, f"The doctor's burn did not measure power ({burn.get('status', '?')}: {reason}); {how}."
    return power, None


def card_bandwidth(bill: Bill) -> tuple[float | None, str | None]:
    """GB/s of the plan's GPU (hardware catalog), else of the first GPU doctor found in the catalog."""
    name = bill.plan_gpu
    if name:
        try:
            return find_gpu(name).bandwidth_gb_s, None
        except ConfigError:
            pass
    gpus = (bill.doctor or {}).get("gpus")
    for gpu in gpus if isinstance(gpus, list) else []:
        value = as_number(gpu.get("bandwidth_gb_s")) if isinstance(gpu, dict) else None
        if value:
            return value, None
    if bill.plan is None:
        return None, None  # the missing plan's own note says to pass --plan
    return None, (
        f"The plan's GPU {name!r} is not in the hardware catalog, so its bandwidth is unknown: plan with "
        "--gpu NAME from the catalog, or pass --doctor FILE from the GPU machine."
    )


def plan_bytes_per_token(
    plan: SavedPlan | None, bandwidth_gb_s: float | None
) -> tuple[float | None, str | None]:
    """Bytes one decode step reads at short context: bandwidth / the plan's memory-bound decode ceiling."""
    if plan is None:
        return None, "No bytes per token: pass --plan FILE (the output of `servelab plan --json`)."
    ceilings = plan.decode_ceiling_tok_s or SavedCeilings()
    ceiling = ceilings.short
    if not ceiling or ceiling <= 0:
        return None, "The plan gives no short-context decode ceiling, so bytes per token are unknown."
    if (ceilings.bound or "memory") != "memory":
        return (
            None,
            "The plan's decode ceiling is compute-bound, so it does not give the bytes read per token.",
        )
    return (None, None) if bandwidth_gb_s is None else (bandwidth_gb_s * 1e9 / ceiling, None)


def bound_inputs(bill: Bill) -> BoundInputs:
    burn, burn_note = burn_power(bill.doctor)
    bandwidth, bandwidth_note = card_bandwidth(bill)
    per_token, per_token_note = plan_bytes_per_token(bill.plan, bandwidth)
    notes = tuple(n for n in (burn_note, per_token_note, bandwidth_note) if n)
    return BoundInputs(burn, bandwidth, per_token, tuple(dict.fromkeys(notes)))


def _power_notes(bill: Bill, engine: EngineSummary, power: ServingPower) -> list[str]:
    if not power.rows and not power.labelled:
        return [
            f"Run {engine.run_id} has no GPU power samples: `servelab bench` records them on NVIDIA machines "
            "(without --no-power)."
        ]
    if not power.rows:
        return [f"Run {engine.run_id} has no GPU power samples of {engine.label}, only of its other targets."]
    if not power.labelled:
        several = sum(1 for e in bill.engines if e.run_id == engine.run_id) > 1
        return [
            f"Run {engine.run_id}'s power samples do not say their level (stored before the bench labelled "
            f"them): serving power is the mean over all levels{' and targets' if several else ''}."
        ]
    if power.level is None:
        return [
            f"{engine.label} has no power samples at concurrency 1: serving power is the mean over all its levels."
        ]
    return []


def _engine_notes(bill: Bill, engine: EngineSummary, power: ServingPower) -> tuple[str, ...]:
    notes = _power_notes(bill, engine, power)
    if engine.single_stream_tok_s is None:
        notes.append(
            f"{engine.label} has no single-stream decode speed: bench with concurrency 1 in the ladder."
        )
    return tuple(notes)


def engine_bound(bill: Bill, engine: EngineSummary, inputs: BoundInputs) -> EngineBound:
    """The verdict for one engine, its serving power from the level its bandwidth figure is from (c=1)."""
    power = serving_power(engine, bill.power_rows.get(engine.run_id, ()))
    per_token = inputs.bytes_per_token
    if engine.plan is not None and engine.plan is not bill.plan:  # its own plan's bytes per token
        per_token = plan_bytes_per_token(engine.plan, inputs.bandwidth_gb_s)[0]
    analysis = analyse_bound(
        power.rows,
        burn_power_w=inputs.burn_power_w,
        bytes_per_token=per_token,
        tok_s=engine.single_stream_tok_s,
        bandwidth_gb_s=inputs.bandwidth_gb_s,
    )
    gpus = tuple(sorted({r["gpu"] for r in power.rows if isinstance(r.get("gpu"), int)}))
    notes = _engine_notes(bill, engine, power)
    return EngineBound(
        label=engine.label,
        analysis=analysis,
        samples=readings(power.rows),
        gpus=gpus,
        notes=notes,
        power_level=power.level,
        levels=power.levels,
    )


def power_bounds(bill: Bill) -> tuple[BoundInputs, tuple[EngineBound, ...]]:
    """The shared inputs and one analysis per engine/configuration of the bill."""
    inputs = bound_inputs(bill)
    return inputs, tuple(engine_bound(bill, e, inputs) for e in bill.engines)


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value:.0%}"


def _power_at(bound: EngineBound) -> str:
    return "—" if not bound.samples else bound.power_level or "all levels"


def bound_table(bounds: Sequence[EngineBound]) -> TableData:
    headers = (
        "engine / configuration",
        "verdict",
        "serving W (mean)",
        "power at",
        "power samples",
        "burn W",
        "of the burn",
        "decode GB/s",
        "card GB/s",
        "of the bandwidth",
    )
    rows = tuple(
        (
            b.label,
            b.analysis.verdict,
            fmt(b.analysis.serving_power_w, 0),
            _power_at(b),
            fmt(b.samples),
            fmt(b.analysis.burn_power_w, 0),
            _pct(b.analysis.power_fraction),
            fmt(b.analysis.achieved_bandwidth_gb_s, 0),
            fmt(b.analysis.bandwidth_gb_s, 0),
            _pct(b.analysis.bandwidth_fraction),
        )
        for b in bounds
    )
    return TableData(
        "power-bound", "Serving against the burn's power and the card's bandwidth", headers, rows
    )


def bound_sentence(bound: EngineBound) -> str:
    """ "label: verdict — why", the numbers in words."""
    at = f" at {bound.power_level}" if bound.power_level else " over all levels"
    where = (
        f" (mean of {bound.samples} samples on GPU {', '.join(map(str, bound.gpus))}{at})"
        if bound.samples
        else ""
    )
    return f"{bound.label}: {bound.analysis.verdict}{where} — {bound.analysis.why}"


def level_power_table(bounds: Sequence[EngineBound]) -> TableData | None:
    """Per level: the serving GPUs' mean draw and the energy per output token (all serving GPUs' draw / the
    level's aggregate output tok/s); None when no run's samples say their level."""
    headers = (
        "engine / configuration",
        "level",
        "serving W (mean per GPU)",
        "GPUs",
        "power samples",
        "output tok/s",
        "J / output token",
    )
    rows = tuple(
        (
            b.label,
            p.level,
            fmt(p.mean_power_w, 0),
            fmt(p.gpus),
            fmt(p.samples),
            fmt(p.output_tok_s, 1),
            fmt(p.joules_per_token, 2),
        )
        for b in bounds
        for p in b.levels
    )
    return TableData("power-levels", "Serving power and energy per level", headers, rows) if rows else None

"""Was serving bandwidth-bound or compute/power-bound? Pure arithmetic on measured numbers.

Decode reads every weight (and the KV cache) once per token, so achieved bandwidth = bytes per token × tokens
per second. Compared with the card's bandwidth it says how close decode ran to the memory ceiling; serving
power compared with the burn's full-compute power says how much of the compute was in use. The field
report's case: decode near the bandwidth ceiling while drawing a third of the burn's power → bandwidth-bound,
more power (or a higher power limit) would not help.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from servelab.diagnose.power import mean_power_w

BANDWIDTH_BOUND_FRACTION = 0.6  # achieved / peak bandwidth at or above this: memory is the limit
POWER_BOUND_FRACTION = (
    0.85  # serving / full-compute power at or above this: compute or the power cap is the limit
)


@dataclass(frozen=True, kw_only=True)
class BoundAnalysis:
    verdict: str
    why: str
    serving_power_w: float | None = None
    burn_power_w: float | None = None
    power_fraction: float | None = None
    achieved_bandwidth_gb_s: float | None = None
    bandwidth_gb_s: float | None = None
    bandwidth_fraction: float | None = None


def _ratio(part: float | None, whole: float | None) -> float | None:
    return None if part is None or not whole else part / whole


def bound_verdict(bandwidth_fraction: float | None, power_fraction: float | None) -> str:
    """The verdict of the two fractions (achieved / peak bandwidth, serving / full-compute power)."""
    if power_fraction is not None and power_fraction >= POWER_BOUND_FRACTION:
        return "compute/power-bound"
    if bandwidth_fraction is not None and bandwidth_fraction >= BANDWIDTH_BOUND_FRACTION:
        return "bandwidth-bound"
    if bandwidth_fraction is not None and power_fraction is not None:
        return "neither"
    return "undetermined"


def _why(verdict: str, a: BoundAnalysis) -> str:
    bw = (
        (
            f"decode moved {a.achieved_bandwidth_gb_s:.0f} GB/s of the card's {a.bandwidth_gb_s:.0f} GB/s "
            f"({a.bandwidth_fraction:.0%})"
        )
        if a.bandwidth_fraction is not None
        else "bandwidth unknown"
    )
    pw = (
        (
            f"serving drew {a.serving_power_w:.0f} W of the burn's {a.burn_power_w:.0f} W "
            f"({a.power_fraction:.0%})"
        )
        if a.power_fraction is not None
        else "power fraction unknown"
    )
    tail = {
        "bandwidth-bound": "memory bandwidth is the limit; more power or compute would not help — fewer bytes "
        "per token would (lower-bit weights, FP8 KV, shorter context).",
        "compute/power-bound": "the GPU ran near its full-compute power: compute or the power limit is the "
        "limit (prefill-heavy or large batches); a higher power limit or faster kernels would help.",
        "neither": "neither memory nor compute was saturated: time goes to overheads (launch latency, "
        "host stalls, scheduling, inter-GPU communication).",
        "undetermined": "give both the bandwidth figures and the power samples to decide.",
    }[verdict]
    return f"{bw}; {pw}: {tail}"


def analyse_bound(
    serving_rows: Sequence[dict],
    *,
    burn_power_w: float | None,
    bytes_per_token: float | None,
    tok_s: float | None,
    bandwidth_gb_s: float | None,
) -> BoundAnalysis:
    """The verdict with its numbers; `serving_rows` are PowerSampler rows taken while serving."""
    achieved = None if bytes_per_token is None or tok_s is None else bytes_per_token * tok_s / 1e9
    serving = mean_power_w(serving_rows)
    numbers = BoundAnalysis(
        verdict="undetermined",
        why="",
        serving_power_w=serving,
        burn_power_w=burn_power_w,
        power_fraction=_ratio(serving, burn_power_w),
        achieved_bandwidth_gb_s=achieved,
        bandwidth_gb_s=bandwidth_gb_s,
        bandwidth_fraction=_ratio(achieved, bandwidth_gb_s),
    )
    verdict = bound_verdict(numbers.bandwidth_fraction, numbers.power_fraction)
    return BoundAnalysis(**{**numbers.__dict__, "verdict": verdict, "why": _why(verdict, numbers)})

"""A plan's expected speeds as `servelab predict` prices its steps: one truth for `plan` and `predict`.

`servelab plan` states an expected single-stream decode (at a short and at the served context), the aggregate
decode at each batch size and, here, the prefill of a short prompt. Where the steps are priced by the GPU step
model fitted to the corpus, or by this machine's calibration (`machine.price`), those figures are the
emulator's own roofline at those figures (`Roofline.step_s` of one decode step of B sequences, of one prompt
pass), so a plan and a prediction of the same launch say the same speed; each comes with its band (the step
model's cross-validation, `Pricing.band`) and its source. With the plan's figures alone the plan keeps the
planner's arithmetic (sizing/speed.py), and says so.
"""

from __future__ import annotations

import dataclasses

from servelab.hardware.gpus import GPU
from servelab.model.spec import ModelSpec
from servelab.predict.bands import Pricing, group_factors
from servelab.predict.machine import roofline
from servelab.predict.roofline import Roofline
from servelab.scheduling.core import Request, Sequence, Step, Work
from servelab.sizing.types import BatchPoint, DecodeCeilings, Plan, PricedSpeeds

# (figure group, inverse) of each expected speed's band, in order of preference: a decode rate is the inverse
# of a serving run's TPOT (else llama-bench's tg rate), a prefill rate llama-bench's pp rate (else 1 / TTFT)
DECODE_BANDS = (("TPOT/ITL", True), ("tg tok/s", False))
AGGREGATE_BANDS = (("TPOT/ITL", True), ("output tok/s", False))
PREFILL_BANDS = (("pp tok/s", False), ("TTFT", True))


def priced_decode_tok_s(r: Roofline, context: int, batch: int = 1) -> float:
    """Aggregate decode tok/s of `batch` sequences each `context` tokens deep: one step, one token each."""
    works = tuple(
        Work(Sequence(request=Request(i, 0.0, (), 2), generated=1), 1, context) for i in range(batch)
    )
    return batch / r.step_s(Step((works,)))


def priced_prefill_tok_s(r: Roofline, tokens: int) -> float:
    """Prefill tok/s of one `tokens`-token prompt in one pass (nothing cached)."""
    return tokens / r.step_s(Step(((Work(Sequence(request=Request(0, 0.0, (), 1)), tokens, 0),),)))


def _band(
    pricing: Pricing, value: float, batch: int, choices: tuple[tuple[str, bool], ...]
) -> tuple[float, ...]:
    found = group_factors(pricing, choices, batch)
    if found is None:
        return ()
    (lo, hi), _ = found
    return (round(value * lo, 2), round(value * hi, 2))


def priced_plan(plan: Plan, model: ModelSpec, gpu: GPU, pricing: Pricing) -> Plan:
    """`plan` with its expected speeds from `pricing` (their bands and source in `plan.speeds`); with the
    plan's own figures (`plan` source) its expected speeds stay the planner's."""
    p = pricing.provenance
    if p.source == "plan":
        return dataclasses.replace(plan, speeds=PricedSpeeds("plan", p.detail, p.stale))
    r = roofline(plan, model, gpu, pricing.rates)
    e = plan.decode_expected_tok_s
    full = plan.context_served or plan.context
    short_tok_s, full_tok_s = priced_decode_tok_s(r, e.short_context), priced_decode_tok_s(r, full)
    prefill = priced_prefill_tok_s(r, e.short_context)
    bands = {
        "decode_short": _band(pricing, short_tok_s, 1, DECODE_BANDS),
        "decode_full": _band(pricing, full_tok_s, 1, DECODE_BANDS),
        "prefill_short": _band(pricing, prefill, 1, PREFILL_BANDS),
    }

    def batch_points(points: tuple[BatchPoint, ...], kind: str) -> tuple[BatchPoint, ...]:
        out = []
        for point in points:
            value = priced_decode_tok_s(r, point.context, point.batch)
            bands[f"{kind}:{point.batch}"] = _band(pricing, value, point.batch, AGGREGATE_BANDS)
            out.append(dataclasses.replace(point, expected_aggregate_tok_s=round(value, 1)))
        return tuple(out)

    return dataclasses.replace(
        plan,
        decode_expected_tok_s=DecodeCeilings(
            round(short_tok_s, 2), round(full_tok_s, 2), e.short_context, e.bound
        ),
        decode_batch_tok_s=batch_points(plan.decode_batch_tok_s, "batch_short"),
        decode_batch_full_context_tok_s=batch_points(plan.decode_batch_full_context_tok_s, "batch_full"),
        speeds=PricedSpeeds(
            p.source, p.detail, p.stale, round(prefill, 1), {k: v for k, v in bands.items() if v}
        ),
    )

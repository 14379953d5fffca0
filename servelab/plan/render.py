"""Rich tables for plans: one plan's memory components and ceilings, or the comparison of many."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.table import Table

from servelab.plan.emit import shell_line
from servelab.sizing.types import Plan, PlanSet, PricedSpeeds

GIB = 1024**3
MIB = 1024**2
COMPONENTS = (
    ("weights (text)", "weights_text"),
    ("weights (vision)", "weights_vision"),
    ("weights (MTP)", "weights_mtp"),
    ("KV cache", "kv_cache"),
    ("recurrent state", "recurrent_state"),
    ("activations / buffers", "activations"),
    ("runtime (CUDA ctx)", "runtime"),
    ("total", "total"),
    ("GPU capacity", "capacity"),
)

CPU_LABELS = {"runtime": "runtime (processes)", "capacity": "host memory"}


def _gib(n: float) -> str:
    return f"{n / GIB:.2f}"


def _unit(total_bytes: int) -> tuple[str, int]:
    """GiB, or MiB for a model whose whole plan is under 1 GiB (else every row would read 0.00)."""
    return ("MiB", MIB) if total_bytes < GIB else ("GiB", GIB)


def memory_table(plan: Plan) -> Table:
    per = "host" if plan.device_note else "per GPU"
    table = Table(title=f"{plan.model} · {plan.engine} · {plan.quant} · {plan.gpu} · {per}")
    unit, size = _unit(plan.memory_bytes.total)
    table.add_column("component")
    table.add_column(unit, justify="right")
    table.add_column("% of host" if plan.device_note else "% of GPU", justify="right")
    capacity = plan.memory_bytes.capacity or 1
    for label, key in COMPONENTS:
        value = getattr(plan.memory_bytes, key)
        if plan.device_note:  # the CPU device: host memory, the engine's processes
            label = CPU_LABELS.get(key, label)
        table.add_row(label, f"{value / size:.2f}", f"{100 * value / capacity:.1f}")
    if plan.memory_bytes.host_bytes:
        table.add_row("host RAM (not GPU)", f"{plan.memory_bytes.host_bytes / size:.2f}", "")
    return table


def banded(value: float, band: tuple[float, ...] | None) -> str:
    """`142.3 (120-170)`: an expected figure and its band (low-high); the figure alone without one."""
    if not band:
        return f"{value}"
    low, high = band
    return f"{value} ({low:.0f}-{high:.0f})" if low >= 10 else f"{value} ({low:.2g}-{high:.2g})"


def speed_source_lines(sp: PricedSpeeds) -> list[str]:
    """Where the expected speeds came from, what a band is, and a stale calibration's warning."""
    lines = [
        f"expected speeds from: {sp.source} ({sp.detail})"
        if sp.detail
        else f"expected speeds from: {sp.source}"
    ]
    if sp.bands:
        lines.append(
            "(low-high): the band, the 10th-90th percentile of measured / predicted in cross-validation"
        )
    if sp.stale is not None:
        lines.append(f"stale: {sp.stale}")
    return lines


def render_plan(console: Console, plan: Plan) -> None:
    console.print(memory_table(plan))
    verdict = "fits" if plan.fits else "does NOT fit"
    console.print(
        f"{verdict}: context {plan.context} tokens asked, {plan.context_served} served; "
        f"KV {plan.kv_dtype}; {plan.slots} concurrent sequence{'' if plan.slots == 1 else 's'}; tensor parallel {plan.tensor_parallel}"
    )
    c, e, sp = plan.decode_ceiling_tok_s, plan.decode_expected_tok_s, plan.speeds
    bands = sp.bands
    how = f"at {plan.efficiency['decode']:.0%} efficiency" if sp.source == "plan" else f"({sp.source})"
    console.print(
        f"decode ceiling (batch 1): {c.short} tok/s at {c.short_context} tokens, {c.full_context} tok/s at"
        f" {plan.context_served or plan.context} ({c.bound}-bound); expected {how}:"
        f" {banded(e.short, bands.get('decode_short'))} / {banded(e.full_context, bands.get('decode_full'))} tok/s"
    )
    if plan.efficiency_source:
        aside = "" if sp.source == "plan" else f" (the planner's; the expected speeds are the {sp.source}'s)"
        console.print(f"efficiency{aside}: {plan.efficiency_source}", markup=False)
    prefill = (
        ""
        if sp.prefill_short_tok_s is None
        else (
            f"; expected ({sp.source}) {banded(sp.prefill_short_tok_s, bands.get('prefill_short'))} tok/s for"
            f" {c.short_context}"
        )
    )
    console.print(
        f"prefill ceiling: {plan.prefill_ceiling_tok_s} tok/s for a {plan.context_served or plan.context}"
        f"-token prompt, {plan.prefill_short_tok_s} tok/s for {c.short_context} ({plan.prefill_bound}-bound)"
        + prefill
    )
    for line in speed_source_lines(sp):
        console.print(line, markup=False)
    if plan.single_gpu_decode_tok_s is not None:
        console.print(f"one GPU alone: {plan.single_gpu_decode_tok_s} tok/s at the full context")
    if plan.decode_batch_tok_s:
        for kind, points in (
            ("batch_short", plan.decode_batch_tok_s),
            ("batch_full", plan.decode_batch_full_context_tok_s),
        ):
            if points:
                console.print(
                    f"aggregate decode ceiling (expected) at {points[0].context} tokens: "
                    + ", ".join(
                        f"B={p.batch}: {p.aggregate_tok_s} "
                        f"({banded(p.expected_aggregate_tok_s, bands.get(f'{kind}:{p.batch}'))})"
                        for p in points
                    )
                )
    if plan.device_note:
        console.print(f"device: {plan.device_note}", markup=False)
    console.print("engine: " + ", ".join(f"{k}={v}" for k, v in plan.details.items()))
    for warning in plan.warnings:
        prefix = "refuses" if warning in plan.refusals else "warning"
        console.print(f"{prefix}: {warning}", markup=False)
    if plan.searched:
        console.print(f"searched: {', '.join(plan.searched)} (what makes it fit)", markup=False)
    console.print(f"command: {plan.command_line}", markup=False)
    if not plan.fits:
        console.print(f"does not fit as asked: {not_fit_reason(plan)}", markup=False)
        if plan.fits_with:
            console.print(f"fits with: {shell_line(plan.fits_with)} (add to the command)", markup=False)
        else:
            console.print(NO_REMEDY, markup=False)


NO_REMEDY = "no KV dtype or engine setting makes it fit: lower --context, pick a smaller --quant or add GPUs"


def not_fit_reason(plan: Plan) -> str:
    """Why a plan does not fit: the engine's first refusal, else its memory beside the capacity."""
    if plan.refusals:
        return plan.refusals[0]
    m = plan.memory_bytes
    return f"{m.total / GIB:.2f} GiB needed, {m.capacity / GIB:.2f} GiB available"


def remedy_lines(plans: PlanSet) -> list[str]:
    """Under a comparison: that it searched, and each row whose launch with the engine's defaults does not fit,
    with the flags its variant adds."""
    lines = [
        "searched: each row is its engine x format's best fitting variant (a KV dtype, the fix a refusal names);"
        " plan --engine E --quant Q answers for one launch as asked"
    ]
    for p in plans.plans:
        if p.fits_with:
            lines.append(
                f"{p.engine} {p.quant}: its defaults do not fit; fits with {shell_line(p.fits_with)}"
                " (in its command)"
            )
    return lines


def comparison_table(plans: PlanSet) -> Table:
    # stacked short headers, no vertical rules: about 100 columns wide instead of 160
    table = Table(
        title=f"{plans.model} on {plans.gpus} x {plans.gpu}", box=box.SIMPLE_HEAD, collapse_padding=True
    )
    for name, justify in (
        ("engine", "left"),
        ("quant", "left"),
        ("KV", "left"),
        ("fits", "left"),
        ("context\nserved", "right"),
        ("weights\nGiB", "right"),
        ("KV\nGiB", "right"),
        ("state\nGiB", "right"),
        ("total\nGiB", "right"),
        ("decode\nshort\ntok/s", "right"),
        ("decode\nfull\ntok/s", "right"),
        ("prefill\ntok/s", "right"),
    ):
        table.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    for p in plans.plans:
        m = p.memory_bytes
        table.add_row(
            p.engine,
            p.quant,
            p.kv_dtype,
            ("with flags" if p.fits_with else "yes") if p.fits else "no",
            str(p.context_served),
            _gib(m.weights),
            _gib(m.kv_cache),
            _gib(m.recurrent_state),
            _gib(m.total),
            f"{p.decode_ceiling_tok_s.short:.1f}",
            f"{p.decode_ceiling_tok_s.full_context:.1f}",
            f"{p.prefill_ceiling_tok_s:.1f}",
        )
    return table

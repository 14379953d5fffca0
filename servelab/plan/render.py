"""Rich tables for plans: one plan's memory components and ceilings, or the comparison of many."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from servelab.plan.types import Plan, PlanSet

GIB = 1024**3
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


def _gib(n: float) -> str:
    return f"{n / GIB:.2f}"


def memory_table(plan: Plan) -> Table:
    table = Table(title=f"{plan.model} · {plan.engine} · {plan.quant} · {plan.gpu} · per GPU")
    table.add_column("component")
    table.add_column("GiB", justify="right")
    table.add_column("% of GPU", justify="right")
    capacity = plan.memory_bytes.capacity or 1
    for label, key in COMPONENTS:
        value = getattr(plan.memory_bytes, key)
        table.add_row(label, _gib(value), f"{100 * value / capacity:.1f}")
    if plan.memory_bytes.host_bytes:
        table.add_row("host RAM (not GPU)", _gib(plan.memory_bytes.host_bytes), "")
    return table


def render_plan(console: Console, plan: Plan) -> None:
    console.print(memory_table(plan))
    verdict = "fits" if plan.fits else "does NOT fit"
    console.print(f"{verdict}: context {plan.context} tokens asked, {plan.context_served} served; "
                  f"KV {plan.kv_dtype}; {plan.slots} concurrent sequences; tensor parallel {plan.tensor_parallel}")
    c, e = plan.decode_ceiling_tok_s, plan.decode_expected_tok_s
    console.print(f"decode ceiling (batch 1): {c.short} tok/s at {c.short_context} tokens, {c.full_context} tok/s at"
                  f" {plan.context_served or plan.context} ({c.bound}-bound); expected at {plan.efficiency['decode']:.0%}"
                  f" efficiency: {e.short} / {e.full_context} tok/s")
    console.print(f"prefill ceiling: {plan.prefill_ceiling_tok_s} tok/s for a {plan.context_served or plan.context}"
                  f"-token prompt, {plan.prefill_short_tok_s} tok/s for {c.short_context} ({plan.prefill_bound}-bound)")
    if plan.single_gpu_decode_tok_s is not None:
        console.print(f"one GPU alone: {plan.single_gpu_decode_tok_s} tok/s at the full context")
    if plan.decode_batch_tok_s:
        for points in (plan.decode_batch_tok_s, plan.decode_batch_full_context_tok_s):
            if points:
                console.print(f"aggregate decode ceiling at {points[0].context} tokens: " + ", ".join(
                    f"B={p.batch}: {p.aggregate_tok_s}" for p in points))
    console.print("engine: " + ", ".join(f"{k}={v}" for k, v in plan.details.items()))
    for warning in plan.warnings:
        console.print(f"warning: {warning}", markup=False)
    console.print(f"command: {plan.command_line}", markup=False)


def comparison_table(plans: PlanSet) -> Table:
    table = Table(title=f"{plans.model} on {plans.gpus} x {plans.gpu}")
    for name, justify in (("engine", "left"), ("quant", "left"), ("KV", "left"), ("fits", "left"),
                          ("context served", "right"), ("weights GiB", "right"), ("KV GiB", "right"),
                          ("state GiB", "right"), ("total GiB", "right"), ("decode short", "right"),
                          ("decode full", "right"), ("prefill", "right")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for p in plans.plans:
        m = p.memory_bytes
        table.add_row(p.engine, p.quant, p.kv_dtype, "yes" if p.fits else "no", str(p.context_served),
                      _gib(m.weights), _gib(m.kv_cache), _gib(m.recurrent_state), _gib(m.total),
                      f"{p.decode_ceiling_tok_s.short}", f"{p.decode_ceiling_tok_s.full_context}",
                      f"{p.prefill_ceiling_tok_s}")
    return table

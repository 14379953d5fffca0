"""Each decode-efficiency figure from its public measurement, and before -> after for named plans.

Run: python benchmarks/plan_efficiency.py
Prints, per engine table cell (servelab/engines/<e>/efficiency.py): the measured tok/s per sequence, the card, the
bytes one decode step reads (the planner's own, or the hand figure), the derived share of the roofline
(tok/s x bytes / bandwidth) and the table's figure; then the expected decode of a few plans with the old single
figure per engine (ceiling x 0.65 llama.cpp, 0.8 sglang/vLLM) and with the table.
"""

from __future__ import annotations

from servelab.engines.registry import planned
from servelab.hardware.gpus import find_gpu
from servelab.model.load import load_model
from servelab.plan.make import make_plan
from servelab.sizing.efficiency import measured_efficiency, step_bytes

OLD = {"llamacpp": 0.65, "sglang": 0.8, "vllm": 0.8}  # the one figure per engine before the table
CASES = (  # (label, model, gpu, engine, quant, context, parallel, kv dtype)
    ("field report ternary", "Qwen/Qwen3.5-27B", "rtx4090-48g", "llamacpp", "PTQ1_0", 262144, 4, "q8_0"),
    ("field report 4-bit GGUF", "Qwen/Qwen3.5-27B", "rtx4090-48g", "llamacpp", "Q4_K_M", 262144, 4, "q8_0"),
    ("field report sglang AWQ", "Qwen/Qwen3.5-27B", "rtx4090-48g", "sglang", "awq", 262144, 1, "fp8_e5m2"),
    ("vLLM AWQ 27B", "Qwen/Qwen3.5-27B", "rtx4090-48g", "vllm", "awq", 32768, 1, "fp8"),
    ("vLLM bf16 8B H100", "meta-llama/Llama-3.1-8B", "h100-sxm", "vllm", "bf16", 8192, 1, None),
    ("llama.cpp Q4_0 8B 32K", "meta-llama/Llama-3.1-8B", "rtx4090", "llamacpp", "Q4_0", 32768, 1, "f16"),
)


def cells() -> None:
    print(
        f"{'engine':10} {'family':10} {'B':>3} {'tok/s':>8} {'gpu':12} {'GB/step':>8} {'derived':>8} {'table':>6}"
    )
    for engine in planned():
        planner = engine.planner
        assert planner is not None
        for cell in planner.decode_efficiency.cells:
            m = cell.measurement
            if m is None:
                print(
                    f"{engine.name:10} {cell.family:10} {cell.batch:>3} {'—':>8} {'—':12} {'—':>8} {'—':>8}"
                    f" {cell.decode:>6.2f}  {cell.note}"
                )
                continue
            step = step_bytes(m, cell.batch, planner.state_dtypes) / 1e9
            derived = measured_efficiency(cell, planner.state_dtypes)
            print(
                f"{engine.name:10} {cell.family:10} {cell.batch:>3} {m.tok_s:>8.2f} {m.gpu:12} {step:>8.3f}"
                f" {derived:>8.4f} {cell.decode:>6.2f}  {m.url}"
            )


def before_after() -> None:
    print(f"\n{'case':26} {'ceiling short/full':>20} {'before':>16} {'after':>16}  efficiency used")
    for label, model_id, gpu, engine, quant, context, parallel, kv in CASES:
        model = load_model(model_id)
        plan = make_plan(
            model, find_gpu(gpu), engine=engine, quant=quant, context=context, parallel=parallel, kv_dtype=kv
        )
        c, e, old = plan.decode_ceiling_tok_s, plan.decode_expected_tok_s, OLD[engine]
        before = f"{c.short * old:.1f}/{c.full_context * old:.1f}"
        print(
            f"{label:26} {c.short:>9.1f}/{c.full_context:<10.1f} {before:>16} {e.short:>7.1f}/{e.full_context:<8.1f}"
            f"  {plan.efficiency_source}"
        )


if __name__ == "__main__":
    cells()
    before_after()

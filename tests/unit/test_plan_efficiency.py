"""Decode efficiency by engine x weight format x batch (servelab/sizing/efficiency.py, engines/<e>/efficiency.py):
the lookup, each figure against its public measurement, and the planner's use of them (docs/planning.md)."""

from __future__ import annotations

import pytest

from servelab.engines.registry import get_engine
from servelab.hardware.gpus import find_gpu
from servelab.model.dtypes import storage_dtype
from servelab.model.load import load_model
from servelab.model.quant import decode_family
from servelab.plan.make import make_plan
from servelab.sizing.efficiency import EfficiencyTable, decode_efficiency, measured_efficiency, step_bytes
from servelab.sizing.kv import kv_layout
from servelab.sizing.speed import decode_ceiling


def _table(engine: str) -> EfficiencyTable:
    planner = get_engine(engine).planner
    assert planner is not None
    return planner.decode_efficiency


@pytest.mark.parametrize(
    ("quant", "family"),
    [
        ("bf16", "16-bit"),
        ("F16", "16-bit"),
        ("fp8", "fp8"),
        ("fp8-block", "fp8"),
        ("awq", "int4"),
        ("gptq", "int4"),
        ("gptq-w8g128", "int8"),
        ("int-w8g-1-sym", "int8"),
        ("nvfp4", "fp4"),
        ("mxfp4", "fp4"),
        ("MXFP4_MOE", "fp4"),
        ("Q8_0", "q8_0"),
        ("Q4_0", "q4_0"),
        ("Q4_K_M", "q4_k"),
        ("Q5_K_M", "q5_k"),
        ("Q6_K", "q6_k"),
        ("Q3_K_M", "q2_k-q3_k"),
        ("IQ4_XS", "iq"),
        ("IQ3_XXS", "iq"),
        ("TQ1_0", "tq"),
        ("TQ2_0", "tq"),
        ("PTQ1_0", "ptq1_0"),
        ("PQ2_0", "pq2_0"),
        ("no-such-format", "unknown"),
    ],
)
def test_each_format_has_its_kernel_family(quant: str, family: str) -> None:
    assert decode_family(quant) == family


@pytest.mark.parametrize(
    ("engine", "family", "batch", "figure", "tabulated_batch", "source"),
    [
        ("llamacpp", "ptq1_0", 1, 0.19, 1, "docs/reference/field-report.md §6"),
        ("llamacpp", "pq2_0", 4, 0.22, 1, "derived"),
        ("llamacpp", "q4_0", 1, 0.73, 1, "llama.cpp/pull/15802"),
        ("llamacpp", "q4_0", 8, 0.34, 8, "llama.cpp/pull/15802"),
        ("llamacpp", "q4_0", 64, 0.34, 8, "llama.cpp/pull/15802"),  # the largest tabulated batch below
        ("llamacpp", "q4_k", 1, 0.62, 1, "tianchengwu.com"),
        ("llamacpp", "q5_k", 1, 0.63, 1, "tianchengwu.com"),
        ("llamacpp", "q6_k", 1, 0.57, 1, "dmatora/LLM-inference-speed-benchmarks/issues/10"),
        ("llamacpp", "iq", 8, 0.41, 8, "llama.cpp/pull/8215"),
        ("llamacpp", "16-bit", 1, 0.97, 1, "llama.cpp/pull/15131"),
        ("vllm", "16-bit", 1, 0.61, 1, "vllm/pull/23197"),
        ("vllm", "16-bit", 32, 0.44, 16, "vllm/pull/23197"),
        ("vllm", "int8", 8, 0.32, 8, "vllm/pull/23197"),
        ("vllm", "int4", 1, 0.29, 1, "vllm/pull/23197"),
        ("vllm", "int4", 16, 0.19, 16, "vllm/pull/23197"),
        ("vllm", "fp8", 1, 0.62, 1, "club-3090/issues/697"),
        ("vllm", "fp4", 1, 0.16, 1, "vllm/issues/22331"),
    ],
)
def test_a_sourced_cell_gives_its_figure(
    engine: str, family: str, batch: int, figure: float, tabulated_batch: int, source: str
) -> None:
    eff = decode_efficiency(_table(engine), family, batch)
    assert (eff.weights, eff.batch, eff.sourced) == (figure, tabulated_batch, True)
    assert source in eff.note


@pytest.mark.parametrize(
    ("engine", "family", "default", "kv"),
    [
        ("llamacpp", "q8_0", 0.65, 0.97),
        ("llamacpp", "tq", 0.65, 0.97),
        ("vllm", "bnb", 0.8, 0.61),
        ("sglang", "int4", 0.8, 0.8),
        ("sglang", "16-bit", 0.8, 0.8),
    ],
)
def test_a_cell_without_a_measurement_falls_back_to_the_default_and_says_so(
    engine: str, family: str, default: float, kv: float
) -> None:
    eff = decode_efficiency(_table(engine), family, 1)
    assert (eff.weights, eff.kv, eff.sourced, eff.batch) == (default, kv, False, 0)
    assert "no public measurement, the engine's default" in eff.note


@pytest.mark.parametrize("engine", ["llamacpp", "vllm", "sglang"])
def test_every_measured_figure_is_its_measurement_times_bytes_over_bandwidth(engine: str) -> None:
    # the table's literal equals measured tok/s x the planner's bytes per step / the card's bandwidth, 2 decimals
    planner = get_engine(engine).planner
    assert planner is not None
    for cell in planner.decode_efficiency.cells:
        if cell.measurement is not None:
            derived = measured_efficiency(cell, planner.state_dtypes)
            assert round(derived, 2) == cell.decode, (cell.family, cell.batch, derived)


def test_the_pq2_0_figure_is_derived_from_its_speed_beside_ptq1_0() -> None:
    # Bonsai-demo, RTX 4090: PQ2_0 84.85 t/s, PTQ1_0 85.98 t/s on the same model; bytes per token from the planner
    cells = {c.family: c for c in _table("llamacpp").cells if c.batch == 1}
    ptq, ratio = cells["ptq1_0"], 84.85 / 85.98
    assert ptq.measurement is not None
    pq2 = ptq.measurement.__class__(**{**ptq.measurement.__dict__, "quant": "PQ2_0"})
    bytes_ratio = step_bytes(pq2, 1, ("fp32", "fp32")) / step_bytes(ptq.measurement, 1, ("fp32", "fp32"))
    assert round(ptq.decode * ratio * bytes_ratio, 2) == cells["pq2_0"].decode


def _field_report_plan(quant: str):  # type: ignore[no-untyped-def]
    # docs/reference/field-report.md §6: -ngl 99 -c 262144 -fa on -np 4 on one 48 GB RTX 4090
    model = load_model("Qwen/Qwen3.5-27B")
    return make_plan(
        model,
        find_gpu("rtx4090-48g"),
        engine="llamacpp",
        quant=quant,
        context=262144,
        parallel=4,
        kv_dtype="q8_0",
    )


def test_the_ternary_model_predicts_the_field_reports_measured_range() -> None:
    # the report measured 27-35 tok/s where the single 0.65 figure expected 108
    plan = _field_report_plan("PTQ1_0")
    assert 27 <= plan.decode_expected_tok_s.short <= 35
    assert plan.efficiency["decode"] == 0.19 and plan.efficiency["decode_kv"] == 0.97
    assert "ptq1_0 at batch 1: 0.19 (docs/reference/field-report.md §6)" in plan.efficiency_source


def test_the_ternary_model_is_slower_than_4_bit_at_short_context_and_catches_up_at_long() -> None:
    # field report §6: slower than 4-bit at short context (unpacking), caught up at long context (KV reads)
    ternary, four_bit = _field_report_plan("PTQ1_0"), _field_report_plan("Q4_K_M")
    short_ratio = ternary.decode_expected_tok_s.short / four_bit.decode_expected_tok_s.short
    long_ratio = ternary.decode_expected_tok_s.full_context / four_bit.decode_expected_tok_s.full_context
    assert short_ratio < 0.9 and long_ratio > short_ratio and long_ratio > 0.85


def test_kv_reads_at_the_16_bit_figure_reproduce_a_long_context_measurement() -> None:
    # PR #17505: RTX 4090, Llama-3-8B Q4_0 at depth 32768, ubatch 1: 102.76 t/s; the weights at q4_0's 0.73 and the
    # f16 KV at 0.97 predict it within 6 % (a single 0.73 would give 85)
    model = load_model("meta-llama/Llama-3.1-8B")
    plan = make_plan(
        model, find_gpu("rtx4090"), engine="llamacpp", quant="Q4_0", context=32768, kv_dtype="f16"
    )
    assert plan.decode_expected_tok_s.full_context == pytest.approx(102.76, rel=0.06)


def test_batched_expectations_use_the_batch_figure() -> None:
    # vLLM int4 at batch 8: the weights at 0.22 of the bandwidth, the KV at the 16-bit batch-8 figure 0.51
    model = load_model("meta-llama/Llama-3.1-8B", quant="awq")
    gpu = find_gpu("h100-sxm")
    plan = make_plan(model, gpu, engine="vllm", context=4096, parallel=8)
    point = next(p for p in plan.decode_batch_tok_s if p.batch == 8)
    kv = kv_layout(model, storage_dtype(plan.kv_dtype, model.dtype))
    d = decode_ceiling(model, gpu, kv, state_bytes=0, context=point.context, batch=8)
    step_s = d.weight_bytes / (gpu.bandwidth_bytes_s * 0.22) + (d.step_bytes - d.weight_bytes) / (
        gpu.bandwidth_bytes_s * 0.51
    )
    assert point.expected_aggregate_tok_s == round(8 / step_s, 1)
    assert point.aggregate_tok_s == round(8 * d.per_sequence_tok_s, 1)

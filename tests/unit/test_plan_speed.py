"""Speed ceilings: hand-computed rooflines, then the measured decode speeds of docs/reference/memory.md §7/§9 must sit below
the ceiling at the achieved fractions docs/reference/memory.md §7 derives (73% / 97% / 88% / 62%)."""

from __future__ import annotations

import pytest

from servelab.engines.registry import get_engine
from servelab.hardware.gpus import GPU, find_gpu
from servelab.model.load import load_model
from servelab.model.spec import WeightGroup
from servelab.sizing.kv import kv_layout
from servelab.sizing.speed import (
    decode_ceiling,
    prefill_ceiling_tok_s,
    prefill_flops_per_token,
    weight_read_bytes,
)
from tests.unit.plan_models import dense_gqa, mla_moe, qwen35_27b

CARD = GPU(name="test", label="test", memory_mib=1024, bandwidth_gb_s=1000, bf16_tflops=100)


def test_batch_1_decode_is_bandwidth_over_bytes() -> None:
    model = dense_gqa(weights_bytes=10_000_000_000)
    kv = kv_layout(model, "bf16")
    d = decode_ceiling(model, CARD, kv, state_bytes=0, context=0)
    assert d.step_bytes == pytest.approx(weight_read_bytes(model))
    assert d.per_sequence_tok_s == pytest.approx(1e12 / weight_read_bytes(model))
    assert d.bound == "memory"


def test_kv_reads_join_the_weights_at_long_context() -> None:
    model = dense_gqa(weights_bytes=10_000_000_000)
    kv = kv_layout(model, "bf16")
    d = decode_ceiling(model, CARD, kv, state_bytes=0, context=32768)
    assert d.step_bytes == pytest.approx(weight_read_bytes(model) + 32768 * 131072)


def test_state_is_read_and_written_every_step() -> None:
    model = qwen35_27b(groups=(WeightGroup("text", 1, 10**10, "bf16"),))
    kv = kv_layout(model, "bf16")
    d = decode_ceiling(model, CARD, kv, state_bytes=1000, context=0, batch=4)
    assert d.step_bytes == pytest.approx(10**10 + 4 * 2 * 1000)
    assert d.aggregate_tok_s == pytest.approx(4 * d.per_sequence_tok_s)


def test_large_batches_become_compute_bound() -> None:
    model = dense_gqa(weights_bytes=1_000_000)
    d = decode_ceiling(model, CARD, kv_layout(model, "bf16"), state_bytes=0, context=1, batch=4096)
    assert d.bound == "compute"


def test_moe_batch_reads_the_union_of_experts() -> None:
    model = mla_moe()
    one, many = weight_read_bytes(model, 1), weight_read_bytes(model, 64)
    assert one == pytest.approx(36e9)
    assert one < many <= 670e9


def test_prefill_flops_count_weights_and_causal_attention() -> None:
    model = dense_gqa()
    active = sum(w.params for w in model.weights if w.name != "embedding")
    # 32 layers x 32 heads x 128 dims, 4 FLOPs per (query, key) pair, half the context attended on average
    expected = 2 * active + 4 * 32 * 32 * 128 * 4096 / 2
    assert prefill_flops_per_token(model, 4096) == pytest.approx(expected)
    assert prefill_ceiling_tok_s(model, CARD, 4096) == pytest.approx(100e12 / expected)


@pytest.mark.parametrize(
    ("model_id", "quant", "gpu", "kv", "context", "measured", "fraction"),
    [
        # docs/reference/memory.md §9 V9 (ggml-org/llama.cpp PRs #15802, #15131, #17505) and V1 (tianchengwu.com, 2026-04-05)
        ("meta-llama/Llama-3.1-8B", "Q4_0", "rtx3090", "fp16", 1, 156.6, 0.73),
        ("meta-llama/Llama-3.1-8B", "bf16", "rtx4090", "fp16", 1, 65.2, 0.97),
        ("meta-llama/Llama-3.1-8B", "Q4_0", "rtx4090", "fp16", 32768, 102.8, 0.88),
        ("Qwen/Qwen3.5-27B", "Q4_K_M", "rtx4090", "q4_0", 2048, 39.3, 0.62),
    ],
)
def test_measured_decode_sits_below_the_ceiling(
    model_id, quant, gpu, kv, context, measured, fraction
) -> None:
    model = load_model(model_id, quant=quant)
    d = decode_ceiling(model, find_gpu(gpu), kv_layout(model, kv), state_bytes=0, context=context)
    assert d.per_sequence_tok_s > measured
    assert measured / d.per_sequence_tok_s == pytest.approx(fraction, abs=0.03)


def test_llamacpp_default_efficiency_is_within_the_measured_range() -> None:
    # docs/reference/memory.md §7/§8: llama.cpp achieves 0.6-0.9 of peak bandwidth in decode; the default applies
    # to the formats no public measurement covers (docs/planning.md "Decode efficiency")
    planner = get_engine("llama.cpp").planner
    assert planner is not None and 0.6 <= planner.decode_efficiency.default <= 0.9

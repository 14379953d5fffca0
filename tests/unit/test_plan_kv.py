"""KV, recurrent-state and weight-read arithmetic against hand-computed values (sources on each test)."""

from __future__ import annotations

import pytest

from servelab.sizing.kv import kv_layout
from servelab.sizing.state import state_layout
from servelab.sizing.weights import decode_read_bytes, weight_bytes
from tests.unit.plan_models import dense_gqa, mla_moe, qwen35_27b, sliding_5_to_1, small_qwen35

MIB, GIB = 1024**2, 1024**3


def test_dense_gqa_kv_per_token() -> None:
    # Llama-3.1-8B: 2 (K,V) x 32 layers x 8 heads x 128 x 2 bytes = 131,072 B/token
    assert kv_layout(dense_gqa(), "bf16").bytes_per_token == 2 * 32 * 8 * 128 * 2


def test_memory_md_v5_qwen3_8b_needs_5_62_gib_at_40960() -> None:
    # docs/reference/memory.md §9 V5: 36 layers x 8 KV x 128, bf16: 144 KiB/token; 40960 tokens = 5.625 GiB
    layout = kv_layout(dense_gqa(layers=36), "bf16")
    assert layout.bytes_per_token == 144 * 1024
    assert layout.bytes_for(40960) / GIB == pytest.approx(5.625)


def test_sliding_layers_stop_at_the_window() -> None:
    # Gemma-3-27B: 52 sliding + 10 full layers, 2 x 16 x 128 x 2 B = 8 KiB per layer per token
    layout = kv_layout(sliding_5_to_1(), "bf16")
    assert (layout.full_layers, layout.sliding_layers, layout.window) == (10, 52, 1024)
    per_layer = 2 * 16 * 128 * 2
    assert layout.bytes_for(100_000) == 10 * per_layer * 100_000 + 52 * per_layer * 1024
    assert layout.bytes_for(500) == 62 * per_layer * 500


def test_mla_caches_the_latent_once_per_layer() -> None:
    # DeepSeek-V3: (kv_lora_rank 512 + rope 64) = 576 elements per layer, no separate V (docs/reference/memory.md §2)
    assert kv_layout(mla_moe(), "bf16").bytes_per_token == 576 * 61 * 2
    assert kv_layout(mla_moe(), "fp8_e4m3").bytes_per_token == 576 * 61


def test_hybrid_kv_counts_only_full_attention_layers() -> None:
    # Qwen3.5-27B (docs/reference/memory.md §5): 2 x 16 x 4 x 256 = 32,768 elements: bf16 64 KiB, fp8 32 KiB, q8_0 34 KiB, q4_0 18 KiB
    model = qwen35_27b()
    assert kv_layout(model, "bf16").bytes_per_token == 64 * 1024
    assert kv_layout(model, "fp8_e5m2").bytes_per_token == 32 * 1024
    assert kv_layout(model, "q8_0").bytes_per_token == 34 * 1024
    assert kv_layout(model, "q4_0").bytes_per_token == 18 * 1024


def test_mtp_draft_layer_adds_one_seventeenth() -> None:
    # docs/reference/memory.md §5: "+1 layer with MTP draft in vLLM/SGLang pools -> x17/16"
    model = qwen35_27b()
    assert kv_layout(model, "bf16", extra_full_layers=1).bytes_per_token == 64 * 1024 * 17 // 16


def test_gdn_state_per_sequence_sglang_and_llamacpp() -> None:
    # docs/reference/memory.md §5: conv 3 x 10,240, ssm 48 x 128 x 128 per layer; bf16 conv + fp32 ssm: 3,207,168 B/layer,
    # x48 = 146.8 MiB; llama.cpp (both f32): 3,268,608 B/layer x 48 = 149.6 MiB
    model = qwen35_27b()
    sglang = state_layout(model)
    assert sglang.bytes_per_layer == 3_207_168
    assert sglang.bytes_per_sequence / MIB == pytest.approx(146.8, abs=0.05)
    llama = state_layout(model, conv_dtype="fp32", ssm_dtype="fp32")
    assert llama.bytes_per_layer == 3_268_608
    assert llama.bytes_per_sequence / MIB == pytest.approx(149.6, abs=0.05)


def test_memory_md_v8_small_qwen35() -> None:
    # docs/reference/memory.md §9 V8: KV 12,288 B/token; GDN 18.63 MiB/seq; 262,144 tokens = 3.019 GiB (two derivations agree)
    model = small_qwen35()
    assert kv_layout(model, "bf16").bytes_per_token == 12_288
    assert state_layout(model).bytes_per_sequence / MIB == pytest.approx(18.63, abs=0.01)
    total = kv_layout(model, "bf16").bytes_for(262_144) + state_layout(model).bytes_per_sequence
    assert total / GIB == pytest.approx(3.019, abs=0.001)


def test_dense_model_has_no_recurrent_state() -> None:
    assert state_layout(dense_gqa()).bytes_per_sequence == 0


def test_decode_reads_one_embedding_row_and_the_whole_lm_head() -> None:
    model = dense_gqa()
    w = weight_bytes(model)
    expected = w.text + w.lm_head + w.embedding / model.vocab_size
    assert decode_read_bytes(model) == pytest.approx(expected)


def test_moe_decode_reads_only_active_experts() -> None:
    # DeepSeek-V3: 36B of 670B parameters active per token
    model = mla_moe()
    assert decode_read_bytes(model) == pytest.approx(670e9 * 36 / 670)


def test_tensor_parallel_splits_kv_heads_and_replicates_below_one() -> None:
    # sglang/vLLM get_num_kv_heads: max(1, n_kv // tp) heads per GPU (docs/reference/memory.md §2)
    assert kv_layout(dense_gqa(), "bf16", tp=2).bytes_per_token == 2 * 32 * 4 * 128 * 2
    assert kv_layout(dense_gqa(), "bf16", tp=8).bytes_per_token == 2 * 32 * 1 * 128 * 2
    assert kv_layout(dense_gqa(), "bf16", tp=32).bytes_per_token == 2 * 32 * 1 * 128 * 2
    assert kv_layout(mla_moe(), "bf16", tp=8).bytes_per_token == 576 * 61 * 2

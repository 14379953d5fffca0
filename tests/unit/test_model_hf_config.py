"""HF config.json → ModelSpec: layer kinds, attention/MLA/GDN/Mamba/MoE dims and parameter counts.

Hand-computed values name their source: docs/reference/memory.md §5 for Qwen3.5-27B / Qwen3-Next, the
HF modelling layouts (q/k/v/o, SwiGLU gate/up/down, GDN in_proj_qkvz/in_proj_ba/conv1d/out_proj) for counts.
"""

from __future__ import annotations

import json

import pytest

from servelab.errors import ModelFormatError
from servelab.model.catalog import catalog_model
from servelab.model.hf_config import read_config, spec_from_config
from servelab.model.spec import LayerKind

TINY = {
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 100,
    "max_position_embeddings": 4096,
}


def test_dense_params_by_hand() -> None:
    spec = spec_from_config(TINY, name="tiny")
    # per layer: q 64·64 + k,v 64·32 each + o 64·64 = 12,288; MLP 3·64·128 = 24,576; 2 norms 128 → 36,992
    assert spec.weight_group("text").params == 2 * 36_992 + 64
    assert spec.weight_group("embedding").params == spec.weight_group("lm_head").params == 6_400
    assert spec.weight_bytes == 2 * (74_048 + 12_800)  # bf16
    assert spec.attention.head_dim == 16 and spec.kv_heads_per_layer == (2, 2)
    assert spec.max_context == 4096 and not spec.weights_exact


def test_tied_embeddings_have_no_lm_head_group() -> None:
    spec = spec_from_config({**TINY, "tie_word_embeddings": True}, name="tiny")
    assert spec.weight_group("lm_head") is None and spec.tie_word_embeddings


def test_explicit_head_dim_wins() -> None:
    spec = spec_from_config({**TINY, "head_dim": 32}, name="tiny")
    assert spec.attention.head_dim == 32
    # q 64·128, k/v 64·64 each, o 128·64 → 24,576 attention params per layer
    assert spec.weight_group("text").params == 2 * (24_576 + 24_576 + 128) + 64


def test_text_config_nesting_and_vision_group() -> None:
    config = {
        "model_type": "wrapper",
        "tie_word_embeddings": False,
        "text_config": TINY,
        "vision_config": {
            "hidden_size": 32,
            "intermediate_size": 64,
            "depth": 1,
            "patch_size": 2,
            "in_channels": 3,
            "out_hidden_size": 64,
            "spatial_merge_size": 1,
        },
    }
    spec = spec_from_config(config, name="vlm")
    assert spec.architecture == "llama" and spec.num_layers == 2
    # one block: 4·32² + 4·32 + 2·32·64 + 64 + 32 + 4·32 = 8,544; patch 3·2·2·32 + 32 = 416; post-norm 64;
    # projector (merge 1): 32 + 32·64 = 2,080 → 11,104
    assert spec.weight_group("vision").params == 11_104


def test_layer_types_and_sliding_window_patterns() -> None:
    explicit = spec_from_config(
        {**TINY, "layer_types": ["sliding_attention", "full_attention"], "sliding_window": 8}, name="t"
    )
    assert explicit.layer_kinds == (LayerKind.SLIDING_ATTENTION, LayerKind.FULL_ATTENTION)
    assert explicit.attention.sliding_window == 8
    gemma = spec_from_config(
        {**TINY, "num_hidden_layers": 12, "sliding_window": 16, "sliding_window_pattern": 6}, name="t"
    )
    assert [i for i, k in enumerate(gemma.layer_kinds) if k == LayerKind.FULL_ATTENTION] == [5, 11]
    mistral = spec_from_config({**TINY, "sliding_window": 4096}, name="t")
    assert mistral.count(LayerKind.SLIDING_ATTENTION) == 2
    qwen = spec_from_config({**TINY, "sliding_window": 4096, "use_sliding_window": False}, name="t")
    assert qwen.count(LayerKind.FULL_ATTENTION) == 2 and qwen.attention.sliding_window is None


def test_unknown_layer_type_is_a_format_error() -> None:
    with pytest.raises(ModelFormatError, match="unknown layer type 'weird'"):
        spec_from_config({**TINY, "layer_types": ["weird", "full_attention"]}, name="t")


def test_qwen35_27b_layers_kv_and_gdn_state() -> None:
    spec = catalog_model("Qwen/Qwen3.5-27B")
    full = [i for i, k in enumerate(spec.layer_kinds) if k == LayerKind.FULL_ATTENTION]
    assert full == list(range(3, 64, 4)) and spec.count(LayerKind.LINEAR_ATTENTION) == 48
    kv_elements = sum(2 * h * spec.attention.head_dim for h in spec.kv_heads_per_layer)
    assert kv_elements == 32_768  # docs/reference/memory.md §5: 2·16·4·256
    la = spec.linear_attention
    assert la.conv_dim == 10_240 and la.ssm_elements == 786_432 and la.ssm_dtype == "fp32"
    assert spec.mtp_layers == 1 and spec.max_context == 262_144 and spec.vocab_size == 248_320


def test_qwen35_27b_text_params_by_hand() -> None:
    spec = catalog_model("Qwen/Qwen3.5-27B")
    gdn = 5120 * 16_384 + 5120 * 96 + 10_240 * 4 + 96 + 128 + 6144 * 5120  # qkvz, ba, conv1d, dt/A, norm, out
    attn = (
        5120 * 12_288 + 2 * 5120 * 1024 + 6144 * 5120 + 2 * 256
    )  # gated q (query + gate), k, v, o, q/k norm
    mlp, norms = 3 * 5120 * 17_408, 2 * 5120
    assert gdn == 115_876_064
    assert spec.weight_group("text").params == 48 * gdn + 16 * attn + 64 * (mlp + norms) + 5120
    assert (
        spec.weight_group("embedding").params == 248_320 * 5120
    )  # docs/reference/memory.md §5: embed 1.27B, untied lm_head too


def test_moe_counts_all_experts_and_active_ones() -> None:
    config = {
        **TINY,
        "num_experts": 8,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 32,
        "shared_expert_intermediate_size": 16,
        "decoder_sparse_step": 2,
    }
    spec = spec_from_config(config, name="moe")
    assert spec.moe.num_moe_layers == 1 and spec.moe.num_shared_experts == 1
    expert, shared, router = 3 * 64 * 32, 3 * 64 * 16, 64 * 8 + 64  # router + shared_expert_gate
    attn, dense = 12_288, 24_576
    text = spec.weight_group("text")
    assert text.params == 2 * (attn + 128) + dense + 8 * expert + shared + router + 64
    assert text.active_params == 2 * (attn + 128) + dense + 2 * expert + shared + router + 64


def test_deepseek_first_dense_layers_and_mla() -> None:
    spec = catalog_model("deepseek-ai/DeepSeek-V3")
    assert spec.moe.num_moe_layers == 58 and spec.moe.num_experts == 256 and spec.moe.num_shared_experts == 1
    assert spec.mla.kv_lora_rank == 512 and spec.mla.qk_rope_head_dim == 64 and spec.mla.q_lora_rank == 1536
    assert set(spec.kv_heads_per_layer) == {1} and spec.attention.head_dim == 192
    total_b = (spec.weight_group("text").params + 2 * spec.weight_group("embedding").params) / 1e9
    assert round(total_b) == 671  # DeepSeek-V3 card: 671B main model (+ MTP module)
    active_b = (spec.weight_group("text").active_params + spec.weight_group("lm_head").params) / 1e9
    assert round(active_b) == 37  # card: 37B activated


def test_mamba2_state_and_params() -> None:
    config = {
        "model_type": "mamba2",
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "vocab_size": 100,
        "expand": 2,
        "state_size": 16,
        "conv_kernel": 4,
        "n_groups": 1,
        "num_heads": 8,
        "tie_word_embeddings": True,
    }
    spec = spec_from_config(config, name="m2")
    assert spec.layer_kinds == (LayerKind.MAMBA, LayerKind.MAMBA) and spec.kv_heads_per_layer == (0, 0)
    m = spec.mamba
    assert (m.d_inner, m.d_state, m.n_heads, m.conv_dim, m.ssm_elements) == (128, 16, 8, 160, 2048)
    # in_proj 64·(256 + 32 + 8), conv 160·5, dt/A/D 3·8, gated norm 128, out 128·64, layer norms 2·64
    per_layer = 64 * 296 + 160 * 5 + 24 + 128 + 128 * 64 + 128
    assert spec.weight_group("text").params == 2 * per_layer + 64


def test_read_config_errors(tmp_path) -> None:
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ModelFormatError, match=r"config\.json \(config\.json\): not JSON"):
        read_config(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps([1, 2]))
    with pytest.raises(ModelFormatError, match="not a JSON object"):
        read_config(tmp_path / "config.json")
    with pytest.raises(ModelFormatError, match="hidden_size"):
        spec_from_config({"num_hidden_layers": 2}, name="broken")


def test_hostile_layer_counts_fail_before_allocating() -> None:
    with pytest.raises(ModelFormatError, match=r"num_hidden_layers 1000000000 is out of range \(1 to 4096\)"):
        spec_from_config({**TINY, "num_hidden_layers": 10**9}, name="t")
    with pytest.raises(ModelFormatError, match="layer_types lists 1 layers but num_hidden_layers is 2"):
        spec_from_config({**TINY, "layer_types": ["full_attention"]}, name="t")


def test_gemma2_default_alternation_and_jamba_periods() -> None:
    gemma2 = spec_from_config(
        {**TINY, "model_type": "gemma2", "num_hidden_layers": 4, "sliding_window": 4096}, name="g2"
    )
    assert gemma2.layer_kinds == (LayerKind.SLIDING_ATTENTION, LayerKind.FULL_ATTENTION) * 2
    jamba = {
        **TINY,
        "model_type": "jamba",
        "num_hidden_layers": 8,
        "attn_layer_period": 8,
        "attn_layer_offset": 4,
        "expert_layer_period": 2,
        "expert_layer_offset": 1,
        "num_experts": 4,
        "num_experts_per_tok": 2,
        "mamba_d_state": 16,
        "mamba_d_conv": 4,
        "mamba_expand": 2,
    }
    spec = spec_from_config(jamba, name="jamba")
    assert [i for i, k in enumerate(spec.layer_kinds) if k == LayerKind.FULL_ATTENTION] == [4]
    assert spec.count(LayerKind.MAMBA) == 7 and spec.moe.num_moe_layers == 4
    assert spec.mamba.d_inner == 128 and spec.kv_heads_per_layer[4] == 2


def test_granite_hybrid_layers_in_either_spelling_are_mamba_and_attention() -> None:
    """Hub configs say "mamba"/"attention"; transformers >= 5.17 saves "linear_attention"/"full_attention"."""
    granite = {
        **TINY,
        "model_type": "granitemoehybrid",
        "num_hidden_layers": 4,
        "num_local_experts": 0,
        "mamba_d_state": 64,
        "mamba_n_heads": 8,
        "mamba_expand": 2,
    }
    for names in (["mamba"] * 3 + ["attention"], ["linear_attention"] * 3 + ["full_attention"]):
        spec = spec_from_config({**granite, "layer_types": names}, name="granite")
        assert spec.layer_kinds == (LayerKind.MAMBA,) * 3 + (LayerKind.FULL_ATTENTION,)
        assert spec.mamba is not None and spec.linear_attention is None
    qwen3_next = {**granite, "linear_num_key_heads": 2, "linear_num_value_heads": 4, "mamba_d_state": None}
    qwen3_next.update(linear_key_head_dim=32, linear_value_head_dim=32, linear_conv_kernel_dim=4)
    spec = spec_from_config(
        {**qwen3_next, "layer_types": ["linear_attention"] * 3 + ["full_attention"]}, name="q"
    )
    assert spec.count(LayerKind.LINEAR_ATTENTION) == 3  # Gated DeltaNet dims: stays linear attention


def test_unsupported_hybrid_pattern_is_refused_not_guessed() -> None:
    with pytest.raises(ModelFormatError, match="hybrid_override_pattern layouts"):
        spec_from_config({**TINY, "model_type": "nemotron_h", "hybrid_override_pattern": "M*M-"}, name="n")

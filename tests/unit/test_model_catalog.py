"""The offline catalog: every entry builds through the HF config parser, names its source, and matches
published architecture facts (docs/reference/memory.md §5; the models' own config.json / model cards)."""

from __future__ import annotations

import pytest

from servelab.errors import ConfigError
from servelab.model import load_model
from servelab.model.catalog import catalog_entries, catalog_ids, catalog_model, find_catalog_id
from servelab.model.spec import LayerKind

REQUIRED = [
    "Qwen/Qwen3.5-27B",
    "Qwen/Qwen3-Next-80B-A3B-Instruct",
    "Qwen/Qwen3-8B",
    "Qwen/Qwen3-32B",
    "Qwen/Qwen3-30B-A3B",
    "meta-llama/Llama-3.1-8B",
    "meta-llama/Llama-3.1-8B-Instruct",
    "meta-llama/Llama-3.1-70B",
    "meta-llama/Llama-3.1-70B-Instruct",
    "mistralai/Mistral-Small-24B-Instruct-2501",
    "google/gemma-3-27b-it",
    "deepseek-ai/DeepSeek-V3",
    "openai/gpt-oss-20b",
    "openai/gpt-oss-120b",
]


def test_required_models_present_with_sources() -> None:
    entries = catalog_entries()
    assert set(REQUIRED) <= set(entries)
    assert all(entry["source"] and isinstance(entry["config"], dict) for entry in entries.values())


@pytest.mark.parametrize("model_id", REQUIRED)
def test_every_model_builds(model_id: str) -> None:
    spec = catalog_model(model_id)
    assert spec.source == "catalog" and spec.num_layers == len(spec.kv_heads_per_layer) > 0
    assert spec.weight_bytes > 0 and spec.max_context > 0 and not spec.weights_exact


def test_lookup_is_case_insensitive_and_org_optional() -> None:
    assert find_catalog_id("qwen/qwen3.5-27b") == "Qwen/Qwen3.5-27B"
    assert find_catalog_id("GPT-OSS-20B") == "openai/gpt-oss-20b"
    assert find_catalog_id("nope") is None


def test_unknown_model_lists_catalog_ids() -> None:
    with pytest.raises(ConfigError) as info:
        load_model("not-a-model")
    message = str(info.value)
    assert message.startswith("unknown model 'not-a-model': give a catalog id (")
    assert all(model_id in message for model_id in catalog_ids())
    assert "a .gguf file, a config.json or a model directory" in message


@pytest.mark.parametrize(
    ("model_id", "params"),
    [
        ("meta-llama/Llama-3.1-8B", 8_030_261_248),  # safetensors total on the model page
        ("meta-llama/Llama-3.1-70B", 70_553_706_496),
        ("meta-llama/Llama-3.2-1B", 1_235_814_400),
        ("meta-llama/Llama-3.2-3B-Instruct", 3_212_749_824),
    ],
)
def test_llama_params_exact(model_id: str, params: int) -> None:
    assert catalog_model(model_id).total_params == params


def test_qwen3_next_hybrid_moe() -> None:
    spec = catalog_model("Qwen/Qwen3-Next-80B-A3B-Instruct")
    assert spec.count(LayerKind.FULL_ATTENTION) == 12 and spec.count(LayerKind.LINEAR_ATTENTION) == 36
    # docs/reference/memory.md §5
    assert sum(2 * h * spec.attention.head_dim for h in spec.kv_heads_per_layer) == 12_288
    assert spec.linear_attention.conv_dim == 8192
    assert (spec.moe.num_experts, spec.moe.experts_per_token, spec.moe.num_moe_layers) == (512, 10, 48)


def test_gemma3_sliding_window_and_gpt_oss_alternation() -> None:
    gemma = catalog_model("google/gemma-3-27b-it")
    assert gemma.count(LayerKind.SLIDING_ATTENTION) == 52 and gemma.count(LayerKind.FULL_ATTENTION) == 10
    assert gemma.attention.sliding_window == 1024 and gemma.tie_word_embeddings
    assert gemma.weight_group("vision") is not None
    oss = catalog_model("openai/gpt-oss-20b")
    assert oss.layer_kinds[:2] == (LayerKind.SLIDING_ATTENTION, LayerKind.FULL_ATTENTION)
    assert oss.attention.sliding_window == 128 and oss.count(LayerKind.FULL_ATTENTION) == 12
    assert round(oss.total_params / 1e9, 2) == 20.91  # gpt-oss model card


def test_catalog_model_with_gguf_mix() -> None:
    spec = load_model("Qwen3-32B", quant="Q4_K_M")
    assert spec.quant == "Q4_K_M" and spec.name == "Qwen/Qwen3-32B"
    assert 4.5 < spec.weight_bytes * 8 / spec.total_params < 5.0


def test_missing_file_is_named() -> None:
    with pytest.raises(ConfigError, match=r"model file '/nowhere/m\.gguf' does not exist"):
        load_model("/nowhere/m.gguf")


def test_qwen3_30b_a3b_totals() -> None:
    spec = catalog_model("Qwen/Qwen3-30B-A3B")
    # Qwen3-30B-A3B model card: 30.5B parameters, 29.9B non-embedding (lm_head counted as embedding)
    assert round(spec.total_params / 1e9, 1) == 30.5
    assert round(spec.weight_group("text").params / 1e9, 1) == 29.9
    assert spec.moe.num_moe_layers == 48 and spec.moe.experts_per_token == 8


def test_qwen25_biases_counted() -> None:
    spec = catalog_model("Qwen/Qwen2.5-7B-Instruct")
    # Qwen2.5 technical report: 7.61B parameters, 6.53B non-embedding (q/k/v carry biases)
    assert spec.total_params == 7_615_616_512  # the report's 7.61B, truncated
    assert round(spec.weight_group("text").params / 1e9, 2) == 6.53
    assert spec.count(LayerKind.FULL_ATTENTION) == 28  # use_sliding_window false

"""Hand-built ModelSpecs for the planner tests (dimensions from the configs named on each)."""

from __future__ import annotations

from servelab.model.spec import (
    AttentionSpec,
    LayerKind,
    LinearAttentionSpec,
    MLASpec,
    ModelSpec,
    MoESpec,
    WeightGroup,
)

FULL, SLIDING, LINEAR = LayerKind.FULL_ATTENTION, LayerKind.SLIDING_ATTENTION, LayerKind.LINEAR_ATTENTION


def dense_gqa(
    *,
    layers: int = 32,
    kv_heads: int = 8,
    head_dim: int = 128,
    weights_bytes: int = 0,
    vocab: int = 128256,
    hidden: int = 4096,
    max_context: int = 131072,
) -> ModelSpec:
    """Llama-3.1-8B shape (config.json: 32 layers, 32 heads, 8 KV heads, head 128, vocab 128256)."""
    embed = vocab * hidden
    groups = (
        WeightGroup("embedding", embed, embed * 2, "bf16"),
        WeightGroup("lm_head", embed, embed * 2, "bf16"),
        WeightGroup("text", 6_979_321_856, weights_bytes or 6_979_321_856 * 2, "bf16"),
    )
    return ModelSpec(
        name="dense",
        architecture="llama",
        source="test",
        hidden_size=hidden,
        vocab_size=vocab,
        layer_kinds=(FULL,) * layers,
        kv_heads_per_layer=(kv_heads,) * layers,
        attention=AttentionSpec(32, kv_heads, head_dim),
        max_context=max_context,
        intermediate_size=14336,
        weights=groups,
    )


def sliding_5_to_1() -> ModelSpec:
    """Gemma-3-27B shape: 62 layers, 5 sliding (window 1024) per full layer, 16 KV heads of 128."""
    kinds = tuple(FULL if (i + 1) % 6 == 0 else SLIDING for i in range(62))
    return ModelSpec(
        name="sliding",
        architecture="gemma3",
        source="test",
        hidden_size=5376,
        vocab_size=262208,
        layer_kinds=kinds,
        kv_heads_per_layer=(16,) * 62,
        attention=AttentionSpec(32, 16, 128, sliding_window=1024),
        max_context=131072,
        intermediate_size=21504,
    )


def mla_moe() -> ModelSpec:
    """DeepSeek-V3 shape: 61 MLA layers (kv_lora_rank 512, rope 64), 256 experts top-8."""
    text = WeightGroup("text", 670_000_000_000, 670_000_000_000, "fp8", active_params=36_000_000_000)
    return ModelSpec(
        name="mla",
        architecture="deepseek_v3",
        source="test",
        hidden_size=7168,
        vocab_size=129280,
        layer_kinds=(FULL,) * 61,
        kv_heads_per_layer=(128,) * 61,
        attention=AttentionSpec(128, 128, 192, v_head_dim=128),
        max_context=163840,
        mla=MLASpec(512, 64, 128, 128, 1536),
        moe=MoESpec(256, 8, 2048, 1, 2048, 58),
        weights=(text,),
    )


def hybrid(
    *,
    layers: int,
    kv_heads: int,
    head_dim: int,
    k_heads: int,
    v_heads: int,
    key_dim: int,
    hidden: int = 5120,
    vocab: int = 248320,
    max_context: int = 262144,
    groups=(),
) -> ModelSpec:
    """Qwen3.5 hybrid: every 4th layer full attention, the rest Gated DeltaNet (conv kernel 4, SSM fp32)."""
    kinds = tuple(FULL if (i + 1) % 4 == 0 else LINEAR for i in range(layers))
    kv = tuple(kv_heads if k == FULL else 0 for k in kinds)
    return ModelSpec(
        name="hybrid",
        architecture="qwen3_5",
        source="test",
        hidden_size=hidden,
        vocab_size=vocab,
        layer_kinds=kinds,
        kv_heads_per_layer=kv,
        attention=AttentionSpec(24, kv_heads, head_dim),
        max_context=max_context,
        intermediate_size=17408,
        linear_attention=LinearAttentionSpec(k_heads, v_heads, key_dim, key_dim, 4),
        weights=groups,
    )


def qwen35_27b(groups=()) -> ModelSpec:
    """Qwen3.5-27B text config (docs/reference/memory.md §5): 64 layers, 16 full (4 KV x 256), 48 GDN (16 K / 48 V heads x 128)."""
    return hybrid(layers=64, kv_heads=4, head_dim=256, k_heads=16, v_heads=48, key_dim=128, groups=groups)


def small_qwen35() -> ModelSpec:
    """docs/reference/memory.md §9 V8: 24 layers = 18 GDN + 6 full, 2 KV heads of 256; GDN 16 K / 16 V heads (conv_dim 6144)."""
    return hybrid(layers=24, kv_heads=2, head_dim=256, k_heads=16, v_heads=16, key_dim=128, hidden=1024)

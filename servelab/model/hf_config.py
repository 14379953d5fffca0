"""A Hugging Face config.json (or model directory) → `ModelSpec`.

Reads the architecture only: layer kinds (`layer_types`, `full_attention_interval`, sliding-window patterns,
Mamba block types), attention / MLA / Gated DeltaNet / Mamba dimensions, MoE, MTP and the vision tower.
Parameter counts come from `servelab.model.params`; weight bytes from the quantization format
(`servelab.model.quant.synthesise_weights`) unless safetensors headers give them exactly.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from servelab.errors import ModelFormatError
from servelab.model.dtypes import find_dtype
from servelab.model.files import read_json
from servelab.model.params import count_params, is_moe_layer, vision_int
from servelab.model.quant import QuantFormat, get_quant, quant_from_config, synthesise_weights
from servelab.model.spec import (
    AttentionSpec,
    LayerKind,
    LinearAttentionSpec,
    MambaSpec,
    MLASpec,
    ModelSpec,
    MoESpec,
    VisionSpec,
    whole,
)

_LAYER_TYPE_NAMES = {
    "full_attention": LayerKind.FULL_ATTENTION,
    "attention": LayerKind.FULL_ATTENTION,
    "global": LayerKind.FULL_ATTENTION,
    "sliding_attention": LayerKind.SLIDING_ATTENTION,
    "sliding": LayerKind.SLIDING_ATTENTION,
    "local": LayerKind.SLIDING_ATTENTION,
    "linear_attention": LayerKind.LINEAR_ATTENTION,
    "mamba": LayerKind.MAMBA,
}
MAX_CONFIG_BYTES = 16 * 1024 * 1024  # a config.json is a few KB
MAX_LAYERS = 4096  # more decoder layers than any real model: a hostile or broken config
# transformers defaults when the config omits the pattern: Gemma2 alternates, Gemma3 has 5 local : 1 global
_DEFAULT_SWA_PATTERN = {"gemma2": 2, "gemma3": 6, "gemma3_text": 6}
_MAMBA_ONLY_TYPES = frozenset({"mamba", "mamba2", "falcon_mamba"})


def read_config(path: Path) -> dict[str, Any]:
    """The JSON object in a config.json, or in `path/config.json` for a model directory."""
    file = path / "config.json" if path.is_dir() else path
    data = read_json(file, MAX_CONFIG_BYTES, "config.json")
    if not isinstance(data, dict):
        raise ModelFormatError(f"{file} is not a JSON object; give a Hugging Face config.json")
    return data


def text_config(config: dict[str, Any]) -> dict[str, Any]:
    """The language-model part: `text_config` for …ForConditionalGeneration models, else the config itself."""
    inner = config.get("text_config")
    if isinstance(inner, dict):
        merged = {k: v for k, v in config.items() if k not in ("text_config", "vision_config")}
        merged.update(inner)
        return merged
    return config


def spec_from_config(config: dict[str, Any], *, name: str, source: str = "hf") -> ModelSpec:
    """The ModelSpec a config describes, weights priced from parameter counts in the checkpoint's own format."""
    text = text_config(config)
    try:
        return _build(config, text, name, source)
    except (KeyError, TypeError, ValueError, ZeroDivisionError, OverflowError) as exc:
        raise ModelFormatError(
            f"config for {name!r} lacks or mangles a field ({exc!r}); is it a decoder LLM?"
        ) from exc


def _build(config: dict[str, Any], text: dict[str, Any], name: str, source: str) -> ModelSpec:
    hidden = text["hidden_size"]
    if type(hidden) is not int or hidden < 1:
        raise ModelFormatError(
            f"config for {name!r}: hidden_size {str(hidden)[:40]} is not a positive integer"
        )
    vision = config.get("vision_config")
    if vision is not None and not isinstance(vision, dict):
        raise ModelFormatError(f"vision_config is {str(vision)[:40]}; a JSON object is expected")
    kinds = layer_kinds(text)
    mla = mla_spec(text)
    attention = attention_spec(text)
    kv_heads = 1 if mla else attention.num_kv_heads
    per_layer_kv = tuple(
        kv_heads if k in (LayerKind.FULL_ATTENTION, LayerKind.SLIDING_ATTENTION) else 0 for k in kinds
    )
    spec = ModelSpec(
        name=name,
        architecture=str(text.get("model_type") or config.get("model_type") or "unknown"),
        source=source,
        hidden_size=whole(text["hidden_size"]),
        vocab_size=whole(text["vocab_size"]),
        layer_kinds=kinds,
        kv_heads_per_layer=per_layer_kv,
        attention=attention,
        max_context=whole(text.get("max_position_embeddings") or 0),
        intermediate_size=whole(text.get("intermediate_size") or 0),
        mla=mla,
        linear_attention=linear_attention_spec(text),
        mamba=mamba_spec(text),
        moe=moe_spec(text, len(kinds)),
        mtp_layers=whole(text.get("mtp_num_hidden_layers") or text.get("num_nextn_predict_layers") or 0),
        vision=vision_spec(vision) if vision else None,
        tie_word_embeddings=bool(config.get("tie_word_embeddings", text.get("tie_word_embeddings", False))),
        dtype=_dtype_name(
            text.get("torch_dtype") or text.get("dtype") or config.get("torch_dtype") or "bfloat16"
        ),
    )
    groups, roles = count_params(spec, text, vision)
    spec.extra.update(param_groups=groups, param_roles=roles)
    return synthesise_weights(spec, native_quant(config, spec.dtype))


def vision_spec(vision: dict[str, Any]) -> VisionSpec:
    """The tower's shape from its `vision_config` (Qwen-VL: depth / hidden_size / spatial_merge_size; SigLIP:
    num_hidden_layers / image_size)."""
    width = vision_int(vision, "hidden_size", "embed_dim", "width")
    deepstack = vision.get("deepstack_visual_indexes") or ()
    return VisionSpec(
        width=width,
        depth=vision_int(vision, "depth", "num_hidden_layers", "num_layers"),
        intermediate=whole(vision.get("intermediate_size") or 4 * width),
        patch=whole(vision.get("patch_size") or 14),
        channels=whole(vision.get("in_channels") or vision.get("num_channels") or 3),
        temporal_patch=whole(vision.get("temporal_patch_size") or 1),
        merge=whole(vision.get("spatial_merge_size") or 1),
        out_hidden=whole(vision.get("out_hidden_size") or 0),
        image_size=whole(vision.get("image_size") or 0),
        deepstack=len(deepstack) if isinstance(deepstack, list) else 0,
    )


def native_quant(config: dict[str, Any], dtype: str) -> QuantFormat:
    """How the checkpoint stores its weights: `quantization_config`, else the config's dtype."""
    qc = config.get("quantization_config") or text_config(config).get("quantization_config")
    if isinstance(qc, dict):
        try:
            return quant_from_config(qc)
        except (TypeError, ValueError, AttributeError, OverflowError) as exc:  # a field of the wrong kind
            raise ModelFormatError(
                f"quantization_config holds a value of the wrong kind ({str(exc)[:120]}); "
                "give the checkpoint's own config.json"
            ) from None
    return get_quant(dtype if dtype in ("bf16", "fp16", "fp32") else "bf16")


def layer_kinds(text: dict[str, Any]) -> tuple[LayerKind, ...]:
    """Each decoder layer's kind, from the most explicit field the config has."""
    n = whole(text["num_hidden_layers"])
    if not 0 < n <= MAX_LAYERS:
        raise ModelFormatError(f"num_hidden_layers {n} is out of range (1 to {MAX_LAYERS})")
    for field in ("layer_types", "layers_block_type"):
        names = text.get(field)
        if isinstance(names, list):
            if len(names) < n:
                raise ModelFormatError(f"{field} lists {len(names)} layers but num_hidden_layers is {n}")
            return _mamba_spelled_linear(text, tuple(_layer_kind(t) for t in names[:n]))
    if text.get("model_type") in _MAMBA_ONLY_TYPES:
        return (LayerKind.MAMBA,) * n
    if text.get("hybrid_override_pattern"):
        raise ModelFormatError(
            f"{text.get('model_type')}: hybrid_override_pattern layouts (Nemotron-H) are not "
            "supported yet; give a GGUF file of the model instead"
        )
    if text.get("attn_layer_period"):  # Jamba: attention every `period` layers at `offset`, Mamba elsewhere
        period, offset = whole(text["attn_layer_period"]), whole(text.get("attn_layer_offset") or 0)
        return tuple(LayerKind.FULL_ATTENTION if i % period == offset else LayerKind.MAMBA for i in range(n))
    if text.get("full_attention_interval"):
        every = whole(text["full_attention_interval"])
        return tuple(
            LayerKind.FULL_ATTENTION if (i + 1) % every == 0 else LayerKind.LINEAR_ATTENTION for i in range(n)
        )
    return _sliding_pattern(text, n)


def _mamba_spelled_linear(text: dict[str, Any], kinds: tuple[LayerKind, ...]) -> tuple[LayerKind, ...]:
    """transformers >= 5.17 saves Mamba layers as "linear_attention" (and attention as "full_attention"):
    a config with Mamba state dims and no Gated DeltaNet dims has Mamba layers (docs/reference/vllm-cpu.md §2)."""
    if text.get("linear_num_key_heads") or not (text.get("mamba_d_state") or text.get("ssm_state_size")):
        return kinds
    return tuple(LayerKind.MAMBA if k == LayerKind.LINEAR_ATTENTION else k for k in kinds)


def _layer_kind(name: object) -> LayerKind:
    kind = _LAYER_TYPE_NAMES.get(str(name).lower())
    if kind is None:
        raise ModelFormatError(f"unknown layer type {name!r}; known: {', '.join(sorted(_LAYER_TYPE_NAMES))}")
    return kind


def _sliding_pattern(text: dict[str, Any], n: int) -> tuple[LayerKind, ...]:
    """Gemma-style `sliding_window_pattern` (every Nth layer global), or all-sliding Mistral-style windows."""
    window = text.get("sliding_window")
    if not window or text.get("use_sliding_window") is False:
        return (LayerKind.FULL_ATTENTION,) * n
    pattern = text.get("sliding_window_pattern") or _DEFAULT_SWA_PATTERN.get(str(text.get("model_type")))
    if pattern:
        every = whole(pattern)
        return tuple(
            LayerKind.FULL_ATTENTION if (i + 1) % every == 0 else LayerKind.SLIDING_ATTENTION
            for i in range(n)
        )
    max_window_layers = text.get("max_window_layers")
    if max_window_layers is not None and text.get(
        "use_sliding_window"
    ):  # Qwen2: layers >= max_window_layers slide
        return tuple(
            LayerKind.SLIDING_ATTENTION if i >= whole(max_window_layers) else LayerKind.FULL_ATTENTION
            for i in range(n)
        )
    return (LayerKind.SLIDING_ATTENTION,) * n


def attention_spec(text: dict[str, Any]) -> AttentionSpec:
    """Query/KV heads and head dims (GQA; explicit `head_dim` wins over hidden / heads)."""
    heads = whole(text.get("num_attention_heads") or 0)
    if text.get("kv_lora_rank"):  # MLA: per-head q/k dims are nope + rope
        head_dim = whole(text["qk_nope_head_dim"]) + whole(text["qk_rope_head_dim"])
        return AttentionSpec(heads, heads, head_dim, whole(text["v_head_dim"]), _window(text))
    if heads == 0:  # pure Mamba
        return AttentionSpec(0, 0, 0)
    head_dim = whole(text.get("head_dim") or whole(text["hidden_size"]) // heads)
    kv_heads = whole(text.get("num_key_value_heads") or heads)
    return AttentionSpec(heads, kv_heads, head_dim, None, _window(text))


def _window(text: dict[str, Any]) -> int | None:
    window = text.get("sliding_window")
    if not window or text.get("use_sliding_window") is False:
        return None
    return whole(window)


def mla_spec(text: dict[str, Any]) -> MLASpec | None:
    if not text.get("kv_lora_rank"):
        return None
    q_lora = text.get("q_lora_rank")
    return MLASpec(
        kv_lora_rank=whole(text["kv_lora_rank"]),
        qk_rope_head_dim=whole(text["qk_rope_head_dim"]),
        qk_nope_head_dim=whole(text.get("qk_nope_head_dim") or 0),
        v_head_dim=whole(text.get("v_head_dim") or 0),
        q_lora_rank=whole(q_lora) if q_lora else None,
    )


def linear_attention_spec(text: dict[str, Any]) -> LinearAttentionSpec | None:
    """Gated DeltaNet dimensions (`linear_num_key_heads` …); None for models without linear attention."""
    if not text.get("linear_num_key_heads"):
        return None
    return LinearAttentionSpec(
        num_key_heads=whole(text["linear_num_key_heads"]),
        num_value_heads=whole(text["linear_num_value_heads"]),
        key_head_dim=whole(text["linear_key_head_dim"]),
        value_head_dim=whole(text["linear_value_head_dim"]),
        conv_kernel=whole(text["linear_conv_kernel_dim"]),
        ssm_dtype=_dtype_name(text.get("mamba_ssm_dtype") or "float32"),
    )


def mamba_spec(text: dict[str, Any]) -> MambaSpec | None:
    """Mamba / Mamba2 state dims (`state_size`/`ssm_state_size`/`mamba_d_state`, `conv_kernel`/`mamba_d_conv`)."""
    d_state = text.get("state_size") or text.get("ssm_state_size") or text.get("mamba_d_state")
    if not d_state:
        return None
    hidden = whole(text["hidden_size"])
    expand = text.get("expand") or text.get("mamba_expand") or 2
    d_inner = whole(
        text.get("mamba_d_inner")
        or (text.get("intermediate_size") if text.get("model_type") == "mamba" else 0)
        or expand * hidden
    )
    n_heads = whole(
        text.get("mamba_n_heads") or (text.get("num_heads") if text.get("model_type") == "mamba2" else 0) or 0
    )
    return MambaSpec(
        d_inner=d_inner,
        d_state=whole(d_state),
        d_conv=whole(text.get("conv_kernel") or text.get("mamba_d_conv") or 4),
        n_groups=whole(text.get("n_groups") or text.get("mamba_n_groups") or 1),
        n_heads=n_heads,
        ssm_dtype=_dtype_name(text.get("mamba_ssm_dtype") or "float32"),
    )


def moe_spec(text: dict[str, Any], num_layers: int) -> MoESpec | None:
    """Routed experts, top-k, shared experts and how many layers are MoE (the rest dense)."""
    experts = text.get("num_experts") or text.get("num_local_experts") or text.get("n_routed_experts")
    if not experts:
        return None
    top_k = text.get("num_experts_per_tok") or text.get("experts_per_token") or text.get("moe_topk") or 1
    expert_size = whole(text.get("moe_intermediate_size") or text["intermediate_size"])
    n_shared = whole(text.get("n_shared_experts") or 0)
    shared_size = whole(text.get("shared_expert_intermediate_size") or 0)
    if n_shared and not shared_size:
        shared_size = expert_size
    elif shared_size and not n_shared:
        n_shared = 1
    return MoESpec(
        num_experts=whole(experts),
        experts_per_token=whole(top_k),
        expert_intermediate_size=expert_size,
        num_shared_experts=n_shared,
        shared_expert_intermediate_size=shared_size,
        num_moe_layers=sum(1 for i in range(num_layers) if is_moe_layer(text, i)),
    )


def _dtype_name(value: object) -> str:
    return find_dtype(str(value)) or str(value)

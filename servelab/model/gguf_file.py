"""A GGUF file → ModelSpec: architecture from `{arch}.*` metadata, exact bytes from the tensor table.

Layer kinds: `full_attention_interval` (qwen35, qwen35moe, qwen3next: every Nth layer attention, the rest Gated
DeltaNet), mamba/mamba2 (all recurrent), per-layer `head_count_kv` arrays (0 = recurrent layer in hybrids), and
llama.cpp's sliding-window periods (gemma2/gpt-oss every 2nd layer global, gemma3 every 6th; src/llama-model.cpp
`set_swa_pattern`). `nextn_predict_layers` trailing blocks are MTP layers (llama.cpp counts them in block_count).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from servelab.errors import ModelFormatError
from servelab.model.gguf_header import GGUFHeader, GGUFTensorInfo, SkippedArray, read_gguf_header
from servelab.model.hf_config import MAX_LAYERS
from servelab.model.spec import (
    AttentionSpec,
    LayerKind,
    LinearAttentionSpec,
    MambaSpec,
    MLASpec,
    ModelSpec,
    MoESpec,
    WeightGroup,
)

_SWA_PERIOD = {"gemma2": 2, "gpt-oss": 2, "gemma3": 6, "cohere2": 4}
_GDN_ARCHS = frozenset({"qwen35", "qwen35moe", "qwen3next"})
_MAMBA_ARCHS = frozenset({"mamba", "mamba2"})


def read_gguf(path: Path) -> ModelSpec:
    """Describe a GGUF model file (header only)."""
    header = read_gguf_header(path)
    return spec_from_header(header, name=path.name)


def spec_from_header(header: GGUFHeader, *, name: str) -> ModelSpec:
    meta = header.metadata
    arch = str(meta.get("general.architecture", "unknown"))

    def key(suffix: str, default: Any = None) -> Any:
        return meta.get(f"{arch}.{suffix}", default)

    n_mtp = int(key("nextn_predict_layers", 0) or 0)
    n_layers = int(key("block_count", 0)) - n_mtp
    if not 0 < n_layers <= MAX_LAYERS or n_mtp < 0:
        raise ModelFormatError(
            f"GGUF {arch}.block_count {n_layers + n_mtp} (nextn {n_mtp}) is out of range "
            f"(1 to {MAX_LAYERS} decoder layers)"
        )
    kv_heads = _per_layer(key("attention.head_count_kv", 0), n_layers + n_mtp)[:n_layers]
    kinds = _layer_kinds(arch, key, kv_heads, n_layers)
    per_layer_kv = tuple(
        kv if kind not in (LayerKind.LINEAR_ATTENTION, LayerKind.MAMBA) else 0
        for kv, kind in zip(kv_heads, kinds, strict=True)
    )
    hidden = int(key("embedding_length", 0))
    vocab = _vocab_size(meta, key, header.tensors)
    weights, layer_bytes = _weights(header.tensors, n_layers, key)
    ftype = meta.get("general.file_type")
    quant = _file_type_name(ftype) if ftype is not None else _dominant_type(header.tensors)
    return ModelSpec(
        name=str(meta.get("general.name") or name),
        architecture=arch,
        source="gguf",
        hidden_size=hidden,
        vocab_size=vocab,
        layer_kinds=kinds,
        kv_heads_per_layer=per_layer_kv,
        attention=_attention(key, hidden, kv_heads),
        max_context=int(key("context_length", 0)),
        intermediate_size=max(_per_layer(key("feed_forward_length", 0), 1) or [0]),
        mla=_mla(key),
        linear_attention=_gdn(arch, key),
        mamba=_mamba(arch, key),
        moe=_moe(key, n_layers),
        mtp_layers=n_mtp,
        tie_word_embeddings=not any(t.name == "output.weight" for t in header.tensors),
        quant=quant,
        weights=weights,
        weights_exact=True,
        extra={
            "n_ctx_train": int(key("context_length", 0)),
            "tensor_count": len(header.tensors),
            "kv_count": len(meta),
            "vocab_size": vocab,
            "file_size": header.file_size,
            "layer_bytes": layer_bytes,
            "gguf_version": header.version,
        },
    )


def _per_layer(value: Any, n: int) -> list[int]:
    if isinstance(value, list):
        return [int(v) for v in value] + [0] * max(0, n - len(value))
    return [int(value or 0)] * n


def _layer_kinds(arch: str, key: Any, kv_heads: list[int], n: int) -> tuple[LayerKind, ...]:
    if arch in _MAMBA_ARCHS:
        return (LayerKind.MAMBA,) * n
    interval = key("full_attention_interval")
    if interval:
        return tuple(
            LayerKind.FULL_ATTENTION if (i + 1) % int(interval) == 0 else LayerKind.LINEAR_ATTENTION
            for i in range(n)
        )
    if key("ssm.state_size") and any(kv == 0 for kv in kv_heads):
        return tuple(LayerKind.MAMBA if kv == 0 else LayerKind.FULL_ATTENTION for kv in kv_heads)
    period = _SWA_PERIOD.get(arch)
    if period and key("attention.sliding_window"):
        return tuple(
            LayerKind.SLIDING_ATTENTION if i % period < period - 1 else LayerKind.FULL_ATTENTION
            for i in range(n)
        )
    return (LayerKind.FULL_ATTENTION,) * n


def _attention(key: Any, hidden: int, kv_heads: list[int]) -> AttentionSpec | None:
    heads = int(max(_per_layer(key("attention.head_count", 0), 1)))
    if heads == 0:
        return None
    head_dim = int(key("attention.key_length") or hidden // heads)
    v_dim = key("attention.value_length")
    window = key("attention.sliding_window")
    kv = max(kv_heads or [heads]) or heads
    return AttentionSpec(
        heads,
        kv,
        head_dim,
        int(v_dim) if v_dim and int(v_dim) != head_dim else None,
        int(window) if window else None,
    )


def _mla(key: Any) -> MLASpec | None:
    rank = key("attention.kv_lora_rank")
    if not rank:
        return None
    rope = int(key("rope.dimension_count", 0))
    k_len = int(key("attention.key_length_mla") or key("attention.key_length", 0))
    v_len = int(key("attention.value_length_mla") or key("attention.value_length", 0))
    q_rank = key("attention.q_lora_rank")
    return MLASpec(int(rank), rope, k_len - rope, v_len, int(q_rank) if q_rank else None)


def _gdn(arch: str, key: Any) -> LinearAttentionSpec | None:
    if arch not in _GDN_ARCHS or not key("ssm.state_size"):
        return None
    value_heads = int(key("ssm.time_step_rank"))
    return LinearAttentionSpec(
        num_key_heads=int(key("ssm.group_count")),
        num_value_heads=value_heads,
        key_head_dim=int(key("ssm.state_size")),
        value_head_dim=int(key("ssm.inner_size")) // value_heads,
        conv_kernel=int(key("ssm.conv_kernel")),
        ssm_dtype="fp32",
    )


def _mamba(arch: str, key: Any) -> MambaSpec | None:
    if arch in _GDN_ARCHS or not key("ssm.state_size"):
        return None
    return MambaSpec(
        d_inner=int(key("ssm.inner_size")),
        d_state=int(key("ssm.state_size")),
        d_conv=int(key("ssm.conv_kernel")),
        n_groups=int(key("ssm.group_count") or 1),
        n_heads=int(key("ssm.time_step_rank") or 0) if arch != "mamba" else 0,
    )


def _moe(key: Any, n_layers: int) -> MoESpec | None:
    experts = int(key("expert_count", 0) or 0)
    if not experts:
        return None
    dense = int(key("leading_dense_block_count", 0) or 0)
    shared_size = int(key("expert_shared_feed_forward_length", 0) or 0)
    return MoESpec(
        experts,
        int(key("expert_used_count", 1)),
        int(key("expert_feed_forward_length", 0) or 0),
        int(key("expert_shared_count", 1 if shared_size else 0) or 0),
        shared_size,
        n_layers - dense,
    )


def _vocab_size(meta: dict[str, object], key: Any, tensors: tuple[GGUFTensorInfo, ...]) -> int:
    if key("vocab_size"):
        return int(key("vocab_size"))
    tokens = meta.get("tokenizer.ggml.tokens")
    if isinstance(tokens, SkippedArray | list):
        return tokens.length if isinstance(tokens, SkippedArray) else len(tokens)
    embd = next((t for t in tensors if t.name == "token_embd.weight"), None)
    return embd.shape[1] if embd and len(embd.shape) > 1 else 0


def component_of(name: str, n_layers: int) -> str:
    if name.startswith("token_embd."):
        return "embedding"
    if name.startswith("output."):
        return "lm_head"
    if name.startswith(("v.", "mm.", "mmproj.")):
        return "vision"
    parts = name.split(".")
    if parts[0] == "blk" and len(parts) > 1 and parts[1].isdigit() and int(parts[1]) >= n_layers:
        return "mtp"
    return "text"


def _weights(
    tensors: tuple[GGUFTensorInfo, ...], n_layers: int, key: Any
) -> tuple[tuple[WeightGroup, ...], tuple[int, ...]]:
    """Exact bytes and params per component; bytes per decoder layer (for partial -ngl offload)."""
    sums: dict[str, list[int]] = {}
    types: dict[str, set[str]] = {}
    layer_bytes = [0] * n_layers
    experts_params = experts_bytes = 0
    for t in tensors:
        group = component_of(t.name, n_layers)
        entry = sums.setdefault(group, [0, 0])
        entry[0] += t.elements
        entry[1] += t.nbytes
        types.setdefault(group, set()).add(t.type.name)
        if group == "text" and t.name.startswith("blk.") and t.name.split(".")[1].isdigit():
            layer_bytes[int(t.name.split(".")[1])] += t.nbytes
        if "_exps." in t.name:
            experts_params, experts_bytes = experts_params + t.elements, experts_bytes + t.nbytes
    idle = 1 - int(key("expert_used_count", 0) or 0) / max(1, int(key("expert_count", 0) or 0))
    groups = []
    for name, (params, nbytes) in sums.items():
        dtype = next(iter(types[name])) if len(types[name]) == 1 else "mixed"
        active = active_bytes = None
        if name == "text" and experts_params:
            active, active_bytes = round(params - experts_params * idle), round(nbytes - experts_bytes * idle)
        groups.append(WeightGroup(name, params, nbytes, dtype, active, active_bytes))
    return tuple(groups), tuple(layer_bytes)


def _file_type_name(ftype: object) -> str:
    import gguf  # late: see gguf_types.gguf_types

    if not isinstance(ftype, int | float | str):
        return f"ftype-{ftype}"
    try:
        return gguf.LlamaFileType(int(ftype)).name.removeprefix("MOSTLY_").removeprefix("ALL_")
    except (ValueError, TypeError):
        return f"ftype-{ftype}"


def _dominant_type(tensors: tuple[GGUFTensorInfo, ...]) -> str:
    by_type: dict[str, int] = {}
    for t in tensors:
        by_type[t.type.name] = by_type.get(t.type.name, 0) + t.nbytes
    return max(by_type, key=by_type.__getitem__) if by_type else "unknown"

"""A GGUF file → ModelSpec: architecture from `{arch}.*` metadata, exact bytes from the tensor table.

Layer kinds: `full_attention_interval` (qwen35, qwen35moe, qwen3next: every Nth layer attention, the rest Gated
DeltaNet), mamba/mamba2 (all recurrent), per-layer `head_count_kv` arrays (0 = recurrent layer in hybrids), and
llama.cpp's sliding-window periods (gemma2/gpt-oss every 2nd layer global, gemma3 every 6th; src/llama-model.cpp
`set_swa_pattern`). `nextn_predict_layers` trailing blocks are MTP layers (llama.cpp counts them in block_count).
"""

from __future__ import annotations

import re
from pathlib import Path

from servelab.errors import ModelFormatError
from servelab.model.gguf_header import GGUFHeader, GGUFTensorInfo, SkippedArray, read_gguf_header
from servelab.model.hf_config import MAX_LAYERS
from servelab.model.spec import (
    MAX_DIMENSION,
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
_LAYER_NUMBER = re.compile(r"[0-9]{1,6}")


def read_gguf(path: Path) -> ModelSpec:
    """Describe a GGUF model file (header only)."""
    header = read_gguf_header(path)
    return spec_from_header(header, name=path.name)


def spec_from_header(header: GGUFHeader, *, name: str) -> ModelSpec:
    meta = header.metadata
    arch = str(meta.get("general.architecture", "unknown"))
    key = _Keys(meta, arch)
    n_mtp = key.num("nextn_predict_layers", hi=MAX_LAYERS)
    n_layers = key.num("block_count") - n_mtp
    if not 0 < n_layers <= MAX_LAYERS:
        raise ModelFormatError(
            f"GGUF {arch}.block_count {n_layers + n_mtp} (nextn {n_mtp}) is out of range "
            f"(1 to {MAX_LAYERS} decoder layers)"
        )
    kv_heads = key.per_layer("attention.head_count_kv", n_layers + n_mtp)[:n_layers]
    kinds = _layer_kinds(arch, key, kv_heads, n_layers)
    per_layer_kv = tuple(
        kv if kind not in (LayerKind.LINEAR_ATTENTION, LayerKind.MAMBA) else 0
        for kv, kind in zip(kv_heads, kinds, strict=True)
    )
    hidden = key.num("embedding_length")
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
        max_context=key.num("context_length"),
        intermediate_size=max(key.per_layer("feed_forward_length", 1)),
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
            "n_ctx_train": key.num("context_length"),
            "tensor_count": len(header.tensors),
            "kv_count": len(meta),
            "vocab_size": vocab,
            "file_size": header.file_size,
            "layer_bytes": layer_bytes,
            "gguf_version": header.version,
        },
    )


def checked_int(name: str, value: object, lo: int = 0, hi: int = MAX_DIMENSION) -> int:
    """An integer metadata value in [lo, hi]; floats, strings, bools and arrays are refused with one line."""
    if type(value) is not int:
        raise ModelFormatError(f"GGUF {name} is {_shown(value)}; an integer is expected")
    if not lo <= value <= hi:
        raise ModelFormatError(f"GGUF {name} {value} is out of range ({lo} to {hi})")
    return value


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


class _Keys:
    """The `{arch}.*` metadata, read as checked integers."""

    def __init__(self, meta: dict[str, object], arch: str) -> None:
        self.meta, self.arch = meta, arch

    def raw(self, suffix: str) -> object:
        return self.meta.get(f"{self.arch}.{suffix}")

    def num(self, suffix: str, default: int = 0, lo: int = 0, hi: int = MAX_DIMENSION) -> int:
        value = self.raw(suffix)
        if value is None and default < lo:
            raise ModelFormatError(f"GGUF {self.arch}.{suffix} is missing; this architecture needs it")
        return default if value is None else checked_int(f"{self.arch}.{suffix}", value, lo, hi)

    def per_layer(self, suffix: str, n: int) -> list[int]:
        """One value per layer: an array (padded with 0) or one integer for every layer."""
        value = self.raw(suffix)
        if isinstance(value, list):
            values = [checked_int(f"{self.arch}.{suffix}[{i}]", v) for i, v in enumerate(value)]
            return values + [0] * max(0, n - len(values))
        if isinstance(value, SkippedArray):
            raise ModelFormatError(
                f"GGUF {self.arch}.{suffix} has {value.length} items; one per layer expected"
            )
        return [self.num(suffix)] * n


def _layer_kinds(arch: str, key: _Keys, kv_heads: list[int], n: int) -> tuple[LayerKind, ...]:
    if arch in _MAMBA_ARCHS:
        return (LayerKind.MAMBA,) * n
    interval = key.num("full_attention_interval")
    if interval:
        return tuple(
            LayerKind.FULL_ATTENTION if (i + 1) % interval == 0 else LayerKind.LINEAR_ATTENTION
            for i in range(n)
        )
    if key.num("ssm.state_size") and any(kv == 0 for kv in kv_heads):
        return tuple(LayerKind.MAMBA if kv == 0 else LayerKind.FULL_ATTENTION for kv in kv_heads)
    period = _SWA_PERIOD.get(arch)
    if period and key.num("attention.sliding_window"):
        return tuple(
            LayerKind.SLIDING_ATTENTION if i % period < period - 1 else LayerKind.FULL_ATTENTION
            for i in range(n)
        )
    return (LayerKind.FULL_ATTENTION,) * n


def _attention(key: _Keys, hidden: int, kv_heads: list[int]) -> AttentionSpec | None:
    heads = max(key.per_layer("attention.head_count", 1))
    if heads == 0:
        return None
    head_dim = key.num("attention.key_length") or hidden // heads
    v_dim = key.num("attention.value_length")
    window = key.num("attention.sliding_window")
    kv = max(kv_heads or [heads]) or heads
    return AttentionSpec(heads, kv, head_dim, v_dim if v_dim and v_dim != head_dim else None, window or None)


def _mla(key: _Keys) -> MLASpec | None:
    rank = key.num("attention.kv_lora_rank")
    if not rank:
        return None
    rope = key.num("rope.dimension_count")
    k_len = key.num("attention.key_length_mla") or key.num("attention.key_length")
    v_len = key.num("attention.value_length_mla") or key.num("attention.value_length")
    return MLASpec(rank, rope, k_len - rope, v_len, key.num("attention.q_lora_rank") or None)


def _gdn(arch: str, key: _Keys) -> LinearAttentionSpec | None:
    if arch not in _GDN_ARCHS or not key.num("ssm.state_size"):
        return None
    value_heads = key.num("ssm.time_step_rank", lo=1)
    return LinearAttentionSpec(
        num_key_heads=key.num("ssm.group_count"),
        num_value_heads=value_heads,
        key_head_dim=key.num("ssm.state_size"),
        value_head_dim=key.num("ssm.inner_size") // value_heads,
        conv_kernel=key.num("ssm.conv_kernel"),
        ssm_dtype="fp32",
    )


def _mamba(arch: str, key: _Keys) -> MambaSpec | None:
    if arch in _GDN_ARCHS or not key.num("ssm.state_size"):
        return None
    return MambaSpec(
        d_inner=key.num("ssm.inner_size"),
        d_state=key.num("ssm.state_size"),
        d_conv=key.num("ssm.conv_kernel"),
        n_groups=key.num("ssm.group_count") or 1,
        n_heads=key.num("ssm.time_step_rank") if arch != "mamba" else 0,
    )


def _moe(key: _Keys, n_layers: int) -> MoESpec | None:
    experts = key.num("expert_count")
    if not experts:
        return None
    shared_size = key.num("expert_shared_feed_forward_length")
    return MoESpec(
        experts,
        key.num("expert_used_count", 1),
        key.num("expert_feed_forward_length"),
        key.num("expert_shared_count", 1 if shared_size else 0),
        shared_size,
        n_layers - key.num("leading_dense_block_count"),
    )


def _vocab_size(meta: dict[str, object], key: _Keys, tensors: tuple[GGUFTensorInfo, ...]) -> int:
    if key.num("vocab_size"):
        return key.num("vocab_size")
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
    index = layer_index(name)
    return "mtp" if index is not None and index >= n_layers else "text"


def layer_index(name: str) -> int | None:
    """N of a `blk.N.` tensor name (ASCII digits only: int() would take other scripts' digits), else None."""
    parts = name.split(".", 2)
    if parts[0] != "blk" or len(parts) < 2 or not _LAYER_NUMBER.fullmatch(parts[1]):
        return None
    return int(parts[1])


def _weights(
    tensors: tuple[GGUFTensorInfo, ...], n_layers: int, key: _Keys
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
        index = layer_index(t.name)
        if group == "text" and index is not None:
            layer_bytes[index] += t.nbytes
        if "_exps." in t.name:
            experts_params, experts_bytes = experts_params + t.elements, experts_bytes + t.nbytes
    idle = max(0.0, 1 - key.num("expert_used_count") / max(1, key.num("expert_count")))
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

    if type(ftype) is not int:
        raise ModelFormatError(f"GGUF general.file_type is {_shown(ftype)}; an integer is expected")
    try:
        return gguf.LlamaFileType(ftype).name.removeprefix("MOSTLY_").removeprefix("ALL_")
    except ValueError:
        return f"ftype-{ftype}"


def _dominant_type(tensors: tuple[GGUFTensorInfo, ...]) -> str:
    by_type: dict[str, int] = {}
    for t in tensors:
        by_type[t.type.name] = by_type.get(t.type.name, 0) + t.nbytes
    return max(by_type, key=by_type.__getitem__) if by_type else "unknown"

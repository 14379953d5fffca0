"""KV cache size from the architecture: full-attention layers grow with the context, sliding layers stop at
their window, linear-attention and Mamba layers hold none; MLA caches the compressed latent plus the rope key.

Sources: docs/reference/memory.md §2 (sglang cell_size), §3 (vLLM page_size_bytes), §4 (llama.cpp
n_embd_k_gqa/n_embd_v_gqa rows; MLA is K-only, llama-kv-cache.cpp `has_v = !is_mla`).
Under tensor parallelism (sglang, vLLM) each GPU caches `kv_heads_per_gpu` heads: max(1, n_kv // tp), the KV
heads replicated when there are fewer than GPUs; MLA's latent is not split (every rank holds it whole), §2.
"""

from __future__ import annotations

from dataclasses import dataclass

from servelab.model.dtypes import row_bytes
from servelab.model.spec import LayerKind, ModelSpec


@dataclass(frozen=True)
class KVLayout:
    """Bytes one token adds to the cache, split by how long the layers keep it."""

    full_bytes_per_token: int  # full-attention layers: grows with the whole context
    sliding_bytes_per_token: int  # sliding-window layers: grows up to `window` tokens
    window: int  # 0 when there are no sliding layers
    full_layers: int
    sliding_layers: int

    @property
    def bytes_per_token(self) -> int:
        return self.full_bytes_per_token + self.sliding_bytes_per_token

    def bytes_for(self, tokens: int, sequences: int = 1) -> int:
        """Cache bytes for `sequences` sequences of `tokens` tokens each (sliding layers capped at the window)."""
        sliding_tokens = min(tokens, self.window) if self.window else tokens
        return sequences * (
            self.full_bytes_per_token * tokens + self.sliding_bytes_per_token * sliding_tokens
        )


def kv_heads_per_gpu(num_kv_heads: int, tp: int) -> int:
    """KV heads one GPU caches under `tp`-way tensor parallelism (sglang/vLLM `get_num_kv_heads`)."""
    return max(1, num_kv_heads // max(1, tp))


def layer_kv_bytes_per_token(model: ModelSpec, layer: int, dtype: str, tp: int = 1) -> int:
    """K + V bytes one token occupies in one layer on one of `tp` GPUs (0 for layers without a KV cache)."""
    kind = model.layer_kinds[layer]
    if kind not in (LayerKind.FULL_ATTENTION, LayerKind.SLIDING_ATTENTION):
        return 0
    if model.mla is not None:
        return row_bytes(dtype, model.mla.kv_lora_rank + model.mla.qk_rope_head_dim)
    attn = model.attention
    if attn is None:
        return 0
    n_kv = model.kv_heads_per_layer[layer] if model.kv_heads_per_layer else attn.num_kv_heads
    n_kv = kv_heads_per_gpu(n_kv, tp)
    return row_bytes(dtype, n_kv * attn.head_dim) + row_bytes(dtype, n_kv * attn.value_head_dim)


def kv_layout(model: ModelSpec, dtype: str, *, extra_full_layers: int = 0, tp: int = 1) -> KVLayout:
    """The model's KV layout in `dtype` on one of `tp` GPUs (split by heads); `extra_full_layers` adds draft
    (MTP) layers like the first full layer."""
    full = sliding = n_full = n_sliding = 0
    first_full = 0
    for layer, kind in enumerate(model.layer_kinds):
        size = layer_kv_bytes_per_token(model, layer, dtype, tp)
        if kind == LayerKind.FULL_ATTENTION:
            full, n_full = full + size, n_full + 1
            first_full = first_full or size
        elif kind == LayerKind.SLIDING_ATTENTION:
            sliding, n_sliding = sliding + size, n_sliding + 1
    full += extra_full_layers * first_full
    window = (model.attention.sliding_window or 0) if (model.attention and n_sliding) else 0
    return KVLayout(full, sliding, window, n_full + extra_full_layers, n_sliding)

"""`ModelSpec`: what the planner needs to know about a model, whatever it was read from.

Per-layer facts are tuples indexed by layer; weights are grouped by component with exact bytes when they
were read from a file (GGUF tensor table, safetensors header) and synthesised bytes for catalog models.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class LayerKind(StrEnum):
    FULL_ATTENTION = "full_attention"  # KV cache grows with the context
    SLIDING_ATTENTION = "sliding_attention"  # KV cache capped at the window
    LINEAR_ATTENTION = "linear_attention"  # Gated DeltaNet: fixed conv + recurrent state per sequence
    MAMBA = "mamba"  # Mamba/Mamba2: fixed conv + SSM state per sequence


ATTENTION_KINDS = frozenset({LayerKind.FULL_ATTENTION, LayerKind.SLIDING_ATTENTION})
RECURRENT_KINDS = frozenset({LayerKind.LINEAR_ATTENTION, LayerKind.MAMBA})


@dataclass(frozen=True)
class AttentionSpec:
    num_heads: int
    num_kv_heads: int  # the common value; per-layer values live in ModelSpec.kv_heads_per_layer
    head_dim: int  # key head dim
    v_head_dim: int | None = None  # None: same as head_dim
    sliding_window: int | None = None

    @property
    def value_head_dim(self) -> int:
        return self.v_head_dim if self.v_head_dim is not None else self.head_dim


@dataclass(frozen=True)
class MLASpec:
    """Multi-head latent attention (DeepSeek): the cache holds a compressed latent plus the rope key."""

    kv_lora_rank: int
    qk_rope_head_dim: int
    qk_nope_head_dim: int = 0
    v_head_dim: int = 0
    q_lora_rank: int | None = None


@dataclass(frozen=True)
class LinearAttentionSpec:
    """Gated DeltaNet (Qwen3-Next / Qwen3.5) state dimensions."""

    num_key_heads: int
    num_value_heads: int
    key_head_dim: int
    value_head_dim: int
    conv_kernel: int
    ssm_dtype: str = "fp32"  # config `mamba_ssm_dtype`

    @property
    def key_dim(self) -> int:
        return self.num_key_heads * self.key_head_dim

    @property
    def value_dim(self) -> int:
        return self.num_value_heads * self.value_head_dim

    @property
    def conv_dim(self) -> int:
        return 2 * self.key_dim + self.value_dim

    @property
    def ssm_elements(self) -> int:
        return self.num_value_heads * self.key_head_dim * self.value_head_dim


@dataclass(frozen=True)
class MambaSpec:
    d_inner: int
    d_state: int
    d_conv: int
    n_groups: int = 1
    n_heads: int = 0  # Mamba2 heads; 0 for Mamba1
    ssm_dtype: str = "fp32"

    @property
    def conv_dim(self) -> int:
        return self.d_inner + 2 * self.n_groups * self.d_state

    @property
    def ssm_elements(self) -> int:
        return self.d_inner * self.d_state


@dataclass(frozen=True)
class MoESpec:
    num_experts: int
    experts_per_token: int
    expert_intermediate_size: int
    num_shared_experts: int = 0
    shared_expert_intermediate_size: int = 0
    num_moe_layers: int = 0  # layers whose MLP is MoE (the rest are dense)


@dataclass(frozen=True)
class WeightGroup:
    """One component's weights: `text` (decoder body), `embedding`, `lm_head`, `vision`, `mtp`."""

    name: str
    params: int
    bytes: int
    dtype: str  # storage format, e.g. "bf16", "awq-w4g128", "Q4_K", "mixed"
    active_params: int | None = None  # params touched per token (MoE); None: all of them
    active_bytes: int | None = (
        None  # bytes of those params (MoE with experts stored unlike the rest); None: unknown
    )


@dataclass(frozen=True)
class ModelSpec:
    name: str
    architecture: str  # e.g. "qwen3_5", "llama", "deepseek_v3", "qwen35" (GGUF)
    source: str  # "catalog", "hf", "gguf"
    hidden_size: int
    vocab_size: int
    layer_kinds: tuple[LayerKind, ...]
    kv_heads_per_layer: tuple[int, ...]  # 0 for layers without a KV cache
    attention: AttentionSpec | None
    max_context: int  # max_position_embeddings / n_ctx_train
    intermediate_size: int = 0
    mla: MLASpec | None = None
    linear_attention: LinearAttentionSpec | None = None
    mamba: MambaSpec | None = None
    moe: MoESpec | None = None
    mtp_layers: int = 0
    tie_word_embeddings: bool = False
    dtype: str = "bf16"  # the model's native compute dtype
    quant: str = "bf16"  # how the weights are stored (a quant name from servelab.model.quant)
    weights: tuple[WeightGroup, ...] = ()
    weights_exact: bool = False  # True when bytes come from a file, not from parameter counts
    extra: dict[str, object] = field(default_factory=dict, compare=False, hash=False)

    @property
    def num_layers(self) -> int:
        return len(self.layer_kinds)

    def count(self, kind: LayerKind) -> int:
        return sum(1 for k in self.layer_kinds if k == kind)

    def weight_group(self, name: str) -> WeightGroup | None:
        return next((w for w in self.weights if w.name == name), None)

    @property
    def weight_bytes(self) -> int:
        return sum(w.bytes for w in self.weights)

    @property
    def total_params(self) -> int:
        return sum(w.params for w in self.weights)

"""`ModelSpec`: what the planner needs to know about a model, whatever it was read from.

Per-layer facts are tuples indexed by layer; weights are grouped by component with exact bytes when they
were read from a file (GGUF tensor table, safetensors header) and synthesised bytes for catalog models.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from enum import StrEnum

from servelab.errors import ModelFormatError

MAX_DIMENSION = 1 << 31  # any size, count or context past this is a hostile or broken description


class LayerKind(StrEnum):
    FULL_ATTENTION = "full_attention"  # KV cache grows with the context
    SLIDING_ATTENTION = "sliding_attention"  # KV cache capped at the window
    LINEAR_ATTENTION = "linear_attention"  # Gated DeltaNet: fixed conv + recurrent state per sequence
    MAMBA = "mamba"  # Mamba/Mamba2: fixed conv + SSM state per sequence


def whole(value: object) -> int:
    """A config value that must be a whole number: an int, or a float only when whole (some exporters write
    ``8.0``). A bool, a string or ``12.7`` is refused (ValueError, which the config reader turns into one line),
    instead of being read as 1, 32 or 12."""
    if type(value) is int:
        return value
    if type(value) is float and value.is_integer():
        return int(value)
    raise ValueError(f"{str(value)[:40]!r} is not a whole number")


def check_ranges(owner: object, minimums: dict[str, int]) -> None:
    """Every int field of the dataclass `owner` lies in [minimum, MAX_DIMENSION] (minimum 0 unless named);
    None is allowed where the field is optional. One ModelFormatError line names the field."""
    for f in fields(owner):  # type: ignore[arg-type]
        value = getattr(owner, f.name)
        if type(value) is not int:
            continue
        lo = minimums.get(f.name, 0)
        if not lo <= value <= MAX_DIMENSION:
            raise ModelFormatError(
                f"{type(owner).__name__}.{f.name} is {value}; it must lie in {lo}..{MAX_DIMENSION}"
            )


ATTENTION_KINDS = frozenset({LayerKind.FULL_ATTENTION, LayerKind.SLIDING_ATTENTION})
RECURRENT_KINDS = frozenset({LayerKind.LINEAR_ATTENTION, LayerKind.MAMBA})


@dataclass(frozen=True)
class AttentionSpec:
    num_heads: int
    num_kv_heads: int  # the common value; per-layer values live in ModelSpec.kv_heads_per_layer
    head_dim: int  # key head dim
    v_head_dim: int | None = None  # None: same as head_dim
    sliding_window: int | None = None

    def __post_init__(self) -> None:
        check_ranges(self, {"v_head_dim": 1, "sliding_window": 1})
        if self.num_heads and not (self.num_kv_heads and self.head_dim):
            raise ModelFormatError(
                f"attention with {self.num_heads} heads needs KV heads and a head dim "
                f"(got {self.num_kv_heads} and {self.head_dim})"
            )

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

    def __post_init__(self) -> None:
        check_ranges(self, {"kv_lora_rank": 1, "q_lora_rank": 1})


@dataclass(frozen=True)
class LinearAttentionSpec:
    """Gated DeltaNet (Qwen3-Next / Qwen3.5) state dimensions."""

    num_key_heads: int
    num_value_heads: int
    key_head_dim: int
    value_head_dim: int
    conv_kernel: int
    ssm_dtype: str = "fp32"  # config `mamba_ssm_dtype`

    def __post_init__(self) -> None:
        check_ranges(self, {f.name: 1 for f in fields(self)})

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

    def __post_init__(self) -> None:
        check_ranges(self, {"d_inner": 1, "d_state": 1, "d_conv": 1, "n_groups": 1})

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

    def __post_init__(self) -> None:
        check_ranges(self, {"num_experts": 1, "experts_per_token": 1})
        if self.experts_per_token > self.num_experts:
            raise ModelFormatError(
                f"MoE routes {self.experts_per_token} experts per token but has only {self.num_experts}"
            )


@dataclass(frozen=True, kw_only=True)
class VisionSpec:
    """A vision tower's shape (config.json `vision_config`), for what an engine's start-up profile runs through
    it. `merge` > 1 is a dynamic-resolution tower whose patches are merged `merge` x `merge` into one LLM token
    (Qwen2-VL .. Qwen3.6); `image_size` > 0 a fixed-resolution one (SigLIP in Gemma 3)."""

    width: int  # hidden_size
    depth: int
    intermediate: int
    patch: int
    channels: int = 3
    temporal_patch: int = 1
    merge: int = 1  # spatial_merge_size
    out_hidden: int = 0  # the LLM hidden size the merger projects to (0: the LLM's own)
    image_size: int = 0  # fixed input resolution (0: dynamic)
    deepstack: int = 0  # extra feature levels handed to the LLM (Qwen3-VL deepstack_visual_indexes)

    def __post_init__(self) -> None:
        check_ranges(self, {"width": 1, "depth": 1, "intermediate": 1, "patch": 1, "merge": 1})

    @property
    def patch_values(self) -> int:
        """Input values per patch (channels x temporal x patch x patch): one row of pixel_values."""
        return self.channels * self.temporal_patch * self.patch * self.patch


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

    def __post_init__(self) -> None:
        for name in ("params", "bytes", "active_params", "active_bytes"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ModelFormatError(f"weight group {self.name!r} has {value} {name}; it must be >= 0")


@dataclass(frozen=True, kw_only=True)
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
    vision: VisionSpec | None = None  # the vision tower a multimodal checkpoint carries (None: text only)
    tie_word_embeddings: bool = False
    dtype: str = "bf16"  # the model's native compute dtype
    quant: str = "bf16"  # how the weights are stored (a quant name from servelab.model.quant)
    weights: tuple[WeightGroup, ...] = ()
    weights_exact: bool = False  # True when bytes come from a file, not from parameter counts
    extra: dict[str, object] = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        """Nonsense dimensions (negative, zero where a model needs one, absurdly large) end here, in one line."""
        try:
            check_ranges(self, {"hidden_size": 1})
        except ModelFormatError as exc:
            raise ModelFormatError(f"model {self.name!r}: {exc}") from None
        if not 1 <= len(self.layer_kinds) <= MAX_DIMENSION or len(self.kv_heads_per_layer) != len(
            self.layer_kinds
        ):
            raise ModelFormatError(
                f"model {self.name!r} has {len(self.layer_kinds)} layers and {len(self.kv_heads_per_layer)} "
                "KV head counts; at least one layer and one count per layer are needed"
            )
        if any(type(kv) is not int or not 0 <= kv <= MAX_DIMENSION for kv in self.kv_heads_per_layer):
            raise ModelFormatError(f"model {self.name!r} has a KV head count out of range")
        self._check_architecture()

    def _check_architecture(self) -> None:
        """A model that could not run: attention layers without heads or KV heads, more KV heads than heads,
        no vocabulary, no feed-forward where a dense transformer needs one. One line naming the field."""

        def refuse(field_name: str, value: object, rule: str) -> ModelFormatError:
            return ModelFormatError(f"model {self.name!r}: {field_name} is {value}; {rule}")

        if self.vocab_size < 1:
            raise refuse("the vocabulary size", self.vocab_size, "a language model needs at least one token")
        attention_layers = [i for i, kind in enumerate(self.layer_kinds) if kind in ATTENTION_KINDS]
        if attention_layers:
            heads = self.attention.num_heads if self.attention is not None else 0
            if heads < 1:
                raise refuse("the attention head count", heads, "attention layers need at least one head")
            for i in attention_layers:
                kv = self.kv_heads_per_layer[i]
                if self.mla is None and not 1 <= kv <= heads:
                    raise refuse(
                        f"the KV head count of layer {i}", kv, f"it must lie in 1..{heads} (the heads)"
                    )
        if self.intermediate_size < 1 and self.moe is None and attention_layers:
            raise refuse(
                "the feed-forward size", self.intermediate_size, "a dense transformer layer needs one"
            )

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

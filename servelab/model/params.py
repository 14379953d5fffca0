"""Parameter counts from the architecture, per component and per tensor role.

Layouts follow the Hugging Face modelling code: SwiGLU MLPs (gate, up, down), q/k/v/o attention with
optional biases and q/k norms, Qwen3-Next/Qwen3.5 attention output gate (q_proj twice as wide), Gated
DeltaNet projections (in_proj_qkvz, in_proj_ba, conv1d, dt_bias, A_log, norm, out_proj), MLA (q_a/q_b,
kv_a_with_mqa, kv_b, o), Mamba1/Mamba2 mixers, MoE routers with routed and shared experts. Roles
(`attn_v`, `attn_output`, `ffn_down`, `experts`, `linear`, `small`) let quant formats and GGUF mixes price
each kind of tensor: `linear` is every quantizable matrix of the decoder body, `small` the norms, biases,
routers, convolutions and SSM parameters that quantizers leave in 16/32 bit.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, TypeVar

from servelab.errors import ModelFormatError
from servelab.model.spec import AttentionSpec, LayerKind, ModelSpec, whole

_Part = TypeVar("_Part")

_QK_NORM_TYPES = frozenset(
    {"qwen3", "qwen3_moe", "qwen3_next", "qwen3_5_text", "qwen3_5_moe_text", "gemma3_text", "gemma3", "olmo2"}
)
_QKV_BIAS_TYPES = frozenset({"qwen2", "qwen2_moe", "qwen2_vl", "qwen2_5_vl"})
_GEMMA_NORMS = frozenset({"gemma2", "gemma3", "gemma3_text"})  # four norms per layer
_GATED_ATTENTION_TYPES = frozenset({"qwen3_next"})  # q_proj also emits the output gate


def count_params(
    spec: ModelSpec, text: dict[str, Any], vision: dict[str, Any] | None
) -> tuple[dict[str, tuple[int, int | None]], dict[str, int]]:
    """Params (and active params for MoE) per WeightGroup name, plus the decoder body's params per role."""
    roles: Counter[str] = Counter()
    total = active = 0
    for layer, kind in enumerate(spec.layer_kinds):
        layer_roles, layer_active = decoder_layer(spec, text, layer, kind)
        roles.update(layer_roles)
        total += sum(layer_roles.values())
        active += layer_active
    roles["small"] += spec.hidden_size  # final norm
    total += spec.hidden_size
    active += spec.hidden_size
    embed = spec.vocab_size * spec.hidden_size
    groups: dict[str, tuple[int, int | None]] = {"embedding": (embed, None)}
    if not spec.tie_word_embeddings:
        groups["lm_head"] = (embed, None)
    groups["text"] = (total, active if spec.moe else None)
    if spec.mtp_layers:
        groups["mtp"] = (spec.mtp_layers * mtp_layer(spec, text), None)
    if vision:
        groups["vision"] = (vision_params(vision, spec.hidden_size), None)
    return groups, dict(roles)


def decoder_layer(
    spec: ModelSpec, text: dict[str, Any], layer: int, kind: LayerKind
) -> tuple[Counter[str], int]:
    """One decoder layer's params by role, and the params one token touches in it."""
    roles: Counter[str] = Counter()
    mixer = mixer_params(spec, text, kind)
    roles.update(mixer)
    mlp, mlp_active = mlp_params(spec, text, layer)
    roles.update(mlp)
    norms = (4 if text.get("model_type") in _GEMMA_NORMS else 2) * spec.hidden_size
    roles["small"] += norms
    return roles, sum(mixer.values()) + mlp_active + norms


def mixer_params(spec: ModelSpec, text: dict[str, Any], kind: LayerKind) -> Counter[str]:
    if kind == LayerKind.LINEAR_ATTENTION:
        return gated_deltanet(spec)
    if kind == LayerKind.MAMBA:
        return mamba_mixer(spec, text)
    if spec.mla is not None:
        return mla_attention(spec)
    return attention(spec, text)


def _part(spec: ModelSpec, part: _Part | None, what: str) -> _Part:
    """The spec's shape for one kind of layer, which a model with such layers must have."""
    if part is None:
        raise ModelFormatError(f"{spec.name}: has {what} layers but no {what} shape")
    return part


def _attention(spec: ModelSpec) -> AttentionSpec:
    return _part(spec, spec.attention, "attention")


def attention(spec: ModelSpec, text: dict[str, Any]) -> Counter[str]:
    attn, h = _attention(spec), spec.hidden_size
    q_out = attn.num_heads * attn.head_dim
    kv_out = attn.num_kv_heads * attn.head_dim
    v_out = attn.num_kv_heads * attn.value_head_dim
    roles: Counter[str] = Counter()
    roles["linear"] += h * q_out * (2 if attention_output_gate(text) else 1) + h * kv_out
    roles["attn_v"] += h * v_out
    roles["attn_output"] += attn.num_heads * attn.value_head_dim * h
    if text.get("attention_bias") or text.get("model_type") in _QKV_BIAS_TYPES:
        roles["small"] += q_out + kv_out + v_out + (h if text.get("attention_bias") else 0)
    if text.get("model_type") in _QK_NORM_TYPES:
        roles["small"] += 2 * attn.head_dim
    if text.get("model_type") == "gpt_oss":  # attention sinks: one logit per head
        roles["small"] += attn.num_heads
    return roles


def mla_attention(spec: ModelSpec) -> Counter[str]:
    """DeepSeek MLA: low-rank q (q_a, norm, q_b), kv_a with the shared rope key, kv_b, o."""
    mla, h, heads = _part(spec, spec.mla, "MLA"), spec.hidden_size, _attention(spec).num_heads
    qk_head = mla.qk_nope_head_dim + mla.qk_rope_head_dim
    roles: Counter[str] = Counter()
    if mla.q_lora_rank:
        roles["linear"] += h * mla.q_lora_rank + mla.q_lora_rank * heads * qk_head
        roles["small"] += mla.q_lora_rank
    else:
        roles["linear"] += h * heads * qk_head
    roles["linear"] += h * (mla.kv_lora_rank + mla.qk_rope_head_dim)
    roles["small"] += mla.kv_lora_rank
    roles["attn_v"] += mla.kv_lora_rank * heads * (mla.qk_nope_head_dim + mla.v_head_dim)
    roles["attn_output"] += heads * mla.v_head_dim * h
    return roles


def gated_deltanet(spec: ModelSpec) -> Counter[str]:
    """in_proj_qkvz (q, k, v, z), in_proj_ba (beta, alpha), conv1d, dt_bias, A_log, gated norm, out_proj."""
    la, h = _part(spec, spec.linear_attention, "linear attention"), spec.hidden_size
    roles: Counter[str] = Counter()
    roles["linear"] += h * (2 * la.key_dim + 2 * la.value_dim)
    roles["small"] += h * 2 * la.num_value_heads  # beta/alpha gates: quantizers leave them 16-bit
    roles["small"] += la.conv_dim * la.conv_kernel + 2 * la.num_value_heads + la.value_head_dim
    roles["linear"] += la.value_dim * h
    return roles


def mamba_mixer(spec: ModelSpec, text: dict[str, Any]) -> Counter[str]:
    """Mamba2 (n_heads > 0): in_proj, conv1d+bias, dt_bias, A_log, D, norm, out_proj; Mamba1: x_proj, dt_proj."""
    m, h = _part(spec, spec.mamba, "Mamba"), spec.hidden_size
    roles: Counter[str] = Counter()
    roles["linear"] += m.d_inner * h
    if m.n_heads:
        roles["linear"] += h * (2 * m.d_inner + 2 * m.n_groups * m.d_state + m.n_heads)
        roles["small"] += m.conv_dim * (m.d_conv + 1) + 3 * m.n_heads + m.d_inner
        return roles
    dt_rank = whole(text.get("time_step_rank") or text.get("mamba_dt_rank") or -(-h // 16))
    roles["linear"] += h * 2 * m.d_inner + m.d_inner * (dt_rank + 2 * m.d_state) + dt_rank * m.d_inner
    roles["small"] += m.d_inner * (m.d_conv + 1) + m.d_inner + m.d_inner * m.d_state + m.d_inner
    return roles


def mlp_params(spec: ModelSpec, text: dict[str, Any], layer: int) -> tuple[Counter[str], int]:
    """Dense SwiGLU or MoE (router + routed experts + shared experts); second value: params one token uses."""
    h = spec.hidden_size
    roles: Counter[str] = Counter()
    if spec.moe is None or not is_moe_layer(text, layer):
        if spec.moe is not None and not spec.intermediate_size:
            return roles, 0
        roles["linear"] += 2 * h * spec.intermediate_size
        roles["ffn_down"] += spec.intermediate_size * h
        return roles, sum(roles.values())
    moe = spec.moe
    expert = 3 * h * moe.expert_intermediate_size
    bias = text.get("model_type") == "gpt_oss"  # expert biases (gate_up 2·I, down h) and router bias
    if bias:
        expert += 2 * moe.expert_intermediate_size + h
    roles["experts"] += moe.num_experts * expert
    shared = moe.num_shared_experts * 3 * h * moe.shared_expert_intermediate_size
    roles["linear"] += shared * 2 // 3
    roles["ffn_down"] += shared // 3
    router = h * moe.num_experts + (moe.num_experts if bias else 0)
    router += h if text.get("shared_expert_intermediate_size") else 0  # Qwen shared_expert_gate
    roles["small"] += router
    return roles, moe.experts_per_token * expert + shared + router


def mtp_layer(spec: ModelSpec, text: dict[str, Any]) -> int:
    """One MTP / nextn layer: a full-attention decoder layer (MoE like the last layer) + eh_proj + 3 norms."""
    last = spec.num_layers - 1
    roles, _ = decoder_layer(spec, text, last, LayerKind.FULL_ATTENTION)
    return sum(roles.values()) + 2 * spec.hidden_size * spec.hidden_size + 3 * spec.hidden_size


def vision_params(vision: dict[str, Any], text_hidden: int) -> int:
    """A ViT: patch embedding, pre-norm blocks (qkv, proj, 2-layer MLP, two LayerNorms with bias), projector.

    The projector is a patch merger (merge² × width → text hidden, Qwen-VL) or a norm + linear (Gemma 3).
    """
    width = vision_int(vision, "hidden_size", "embed_dim", "width")
    depth = vision_int(vision, "depth", "num_hidden_layers", "num_layers")
    inner = whole(vision.get("intermediate_size") or 4 * width)
    patch = whole(vision.get("patch_size") or 14)
    temporal = whole(vision.get("temporal_patch_size") or 1)
    channels = whole(vision.get("in_channels") or vision.get("num_channels") or 3)
    block = 4 * width * width + 4 * width + 2 * width * inner + inner + width + 4 * width
    embed = channels * temporal * patch * patch * width + width
    positions = whole(
        vision.get("num_position_embeddings") or (whole(vision.get("image_size") or 0) // patch) ** 2
    )
    out = whole(vision.get("out_hidden_size") or text_hidden)
    merge = whole(vision.get("spatial_merge_size") or 1)
    merged = width * merge * merge
    projector = (
        merged * merged + merged + merged * out + out + 2 * width if merge > 1 else width + width * out
    )
    return depth * block + embed + positions * width + 2 * width + projector


def vision_int(vision: dict[str, Any], *keys: str) -> int:
    """The first of ``keys`` the vision config sets to something truthy, else the last one's value."""
    value = next((vision[k] for k in keys if vision.get(k)), vision.get(keys[-1]))
    if value is None:
        raise ModelFormatError(f"vision config sets none of {', '.join(keys)}")
    return whole(value)


def attention_output_gate(text: dict[str, Any]) -> bool:
    """Qwen3-Next / Qwen3.5 gate the attention output: q_proj is twice as wide."""
    return bool(text.get("attn_output_gate", text.get("model_type") in _GATED_ATTENTION_TYPES))


def is_moe_layer(text: dict[str, Any], layer: int) -> bool:
    """`first_k_dense_replace` (DeepSeek), `decoder_sparse_step` / `mlp_only_layers` (Qwen MoE), Jamba periods."""
    if not (text.get("num_experts") or text.get("num_local_experts") or text.get("n_routed_experts")):
        return False
    if layer < whole(text.get("first_k_dense_replace") or 0):
        return False
    if layer in (text.get("mlp_only_layers") or []):
        return False
    if text.get("expert_layer_period"):  # Jamba
        return layer % whole(text["expert_layer_period"]) == whole(text.get("expert_layer_offset") or 0)
    step = whole(text.get("decoder_sparse_step") or 1)
    return (layer + 1) % step == 0

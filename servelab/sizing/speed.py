"""Speed ceilings from the roofline: decode is bound by bytes read per step, prefill by FLOPs.

decode step bytes = weights read (active; embedding row only; lm_head in full) + KV of every sequence in the batch
                    (full layers x context, sliding layers x min(context, window)) + recurrent state read and written
decode tok/s (per sequence) <= bandwidth / step bytes; the batch shares the weight reads.
prefill FLOPs per token = 2 x active params + 4 x attention width x attended tokens (causal: context / 2 on average)
Engine efficiency factors (achieved / peak, by weight format x batch: sizing/efficiency.py) turn ceilings into
expectations: docs/planning.md "Decode efficiency".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from servelab.hardware.gpus import GPU
from servelab.model.spec import LayerKind, ModelSpec
from servelab.sizing.kv import KVLayout
from servelab.sizing.weights import active_params, decode_read_bytes

if TYPE_CHECKING:
    from servelab.sizing.efficiency import DecodeEfficiency

SHORT_CONTEXT_TOKENS = 1024


@dataclass(frozen=True, kw_only=True)
class DecodeCeiling:
    context: int
    batch: int
    step_bytes: float
    per_sequence_tok_s: float
    aggregate_tok_s: float
    bound: str  # "memory" or "compute"
    weight_bytes: float = 0.0  # the weights' share of step_bytes (the rest: KV and recurrent state)
    compute_s: float = 0.0  # the step's FLOPs at the card's tensor peak


def weight_read_bytes(model: ModelSpec, batch: int = 1) -> float:
    """Weights a decode step reads; for MoE a batch touches the union of its sequences' experts."""
    one = decode_read_bytes(model)
    text = model.weight_group("text")
    if batch == 1 or text is None or text.active_params is None or not text.params:
        return one
    share = text.active_params / text.params
    union = 1 - (1 - share) ** batch
    extra = text.bytes * max(0.0, union - share)
    return min(one + extra, one - text.bytes * share + text.bytes)


def decode_ceiling(
    model: ModelSpec,
    gpu: GPU,
    kv: KVLayout,
    *,
    state_bytes: int,
    context: int,
    batch: int = 1,
    weight_share: float = 1.0,
    compute_dtype: str = "bf16",
) -> DecodeCeiling:
    """Decode ceiling at `context` tokens per sequence and `batch` sequences (`weight_share` = 1/tp)."""
    weights = weight_read_bytes(model, batch) * weight_share
    step = weights + batch * (kv.bytes_for(context) + 2 * state_bytes)
    memory_s = step / gpu.bandwidth_bytes_s
    compute_s = 2 * active_params(model) * weight_share * batch / gpu.tensor_flops(compute_dtype)
    step_s = max(memory_s, compute_s)
    per_seq = 1 / step_s if step_s else 0.0
    bound = "memory" if memory_s >= compute_s else "compute"
    return DecodeCeiling(
        context=context,
        batch=batch,
        step_bytes=step,
        per_sequence_tok_s=per_seq,
        aggregate_tok_s=per_seq * batch,
        bound=bound,
        weight_bytes=weights,
        compute_s=compute_s,
    )


def expected_step_s(d: DecodeCeiling, gpu: GPU, eff: DecodeEfficiency) -> float:
    """One decode step as the engine's kernels run it: the weights at their format's share of the bandwidth, KV
    and state reads at theirs (docs/planning.md "Decode efficiency"); compute at the weights' share of the peak."""
    bandwidth = gpu.bandwidth_bytes_s
    memory_s = d.weight_bytes / (bandwidth * eff.weights) + (d.step_bytes - d.weight_bytes) / (
        bandwidth * eff.kv
    )
    return max(memory_s, d.compute_s / eff.weights)


def attention_width(model: ModelSpec) -> tuple[int, int]:
    """(query heads x head dim summed over full layers, the same over sliding layers)."""
    if model.attention is None:
        return 0, 0
    qk = model.attention.num_heads * (model.attention.head_dim + model.attention.value_head_dim) // 2
    return qk * model.count(LayerKind.FULL_ATTENTION), qk * model.count(LayerKind.SLIDING_ATTENTION)


def prefill_flops_per_token(model: ModelSpec, context: int) -> float:
    """Average FLOPs per prompt token for a prompt of `context` tokens (causal attention: half the context)."""
    full, sliding = attention_width(model)
    window = model.attention.sliding_window if model.attention and model.attention.sliding_window else context
    attended_full = context / 2
    attended_sliding = min(context / 2, window)
    return 2 * active_params(model) + 4 * (full * attended_full + sliding * attended_sliding)


def prefill_ceiling_tok_s(
    model: ModelSpec, gpu: GPU, context: int, *, compute_dtype: str = "bf16", gpus: int = 1
) -> float:
    return gpus * gpu.tensor_flops(compute_dtype) / prefill_flops_per_token(model, context)


def prefill_bound(
    model: ModelSpec, gpu: GPU, context: int, *, chunk_tokens: int, compute_dtype: str = "bf16"
) -> str:
    """Which bound a prefill chunk hits: its FLOPs, or reading every weight once per chunk."""
    compute_s = chunk_tokens * prefill_flops_per_token(model, context) / gpu.tensor_flops(compute_dtype)
    memory_s = weight_read_bytes(model, chunk_tokens) / gpu.bandwidth_bytes_s
    return "compute" if compute_s >= memory_s else "memory"

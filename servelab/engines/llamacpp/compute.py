"""llama.cpp's compute buffer: what ggml-alloc reserves on a backend for the worst-case graph.

Rules (llama.cpp src/llama-context.cpp `sched_reserve` → `graph_reserve(n_tokens, n_seqs, n_outputs)`,
src/llama-graph.cpp `build_attn_mha`, ggml/src/ggml-backend.cpp `ggml_backend_sched_split_graph`; docs/reference/memory.md §4):
- The reserved graph is one ubatch: n_tokens = min(n_ctx, n_ubatch, n_batch), n_outputs = min(n_tokens,
  n_outputs_max). Current builds' llama-server sets n_outputs_max = n_parallel (tools/server `server_output_limits`);
  builds before n_outputs_max existed (through the `sched_reserve` era of early-mid 2026, and every 2024-2025
  build) reserve the pp graph with `graph_reserve(n_tokens, n_seqs, n_tokens)`: every token an output, so the
  f32 logits of the whole ubatch (n_vocab x n_tokens) are in the buffer. ggml-alloc reuses freed tensors, so the
  buffer is the peak of the live intermediates, not their sum.
- Flash attention off: the scores kq = mul_mat(k, q) are f32 [n_kv, n_tokens, n_head] (softmax in place), with
  n_kv the cells one stream sees (n_ctx_seq); the KQ mask is f32 [n_kv, n_tokens]. On: no scores, the mask f16;
  builds before b9410 (PR #23764) reserve the f32 mask as well and cast it, so both are in the buffer (builds.py).
- MLA (src/models/deepseek2.cpp, absorption): q_nope goes through wk_b into the latent, q_nope_absorbed f32
  [kv_lora_rank, n_head, n_tokens]; with the roped q_pe [rope, n_head, n_tokens] it is concatenated into Qcur
  [kv_lora_rank + rope, n_head, n_tokens], and the three are live together at the concat: attention over the
  compressed cache is MQA with a head n_head x wider than the latent, not the GQA q/k/v of the decompressed heads.
- The peak is the larger of the output step (hidden + n_vocab x n_outputs f32 logits) and one layer's
  intermediates (residual + input, then the widest of FFN/MoE, attention or the recurrent scratch) with the mask.
  ggml-alloc frees a tensor after its last consumer unless it is flagged output (ggml/src/ggml-alloc.c
  `ggml_gallocr_alloc_graph_impl` / `ggml_gallocr_free_node`), inputs included: on one device the mask is gone
  once the last layer's attention has run, so the output step holds no mask (docs/reference/memory.md §4).
- Pipeline parallelism (llama-context.cpp: more than one device, n_gpu_layers > n_layer, -sm layer, KV offloaded,
  no tensor override, every device async with events; `pipeline parallelism enabled`): the scheduler keeps
  GGML_SCHED_MAX_COPIES = 4 copies of every graph input and split input on each device, each flagged output
  (ggml-backend.cpp `ggml_backend_sched_split_graph`, n_copies > 1), so the mask and its copies stay to the end
  and each device's buffer grows by 3 more copies of the hidden state it receives and of the mask.
"""

from __future__ import annotations

from servelab.model.spec import ModelSpec

F32 = 4
GRAPH_OVERHEAD_BYTES = 512 * 1024  # ggml graph metadata / alignment slack in the compute buffer (estimate)
SCHED_MAX_COPIES = 4  # GGML_SCHED_MAX_COPIES, ggml-backend.cpp: input copies kept with pipeline parallelism


def attention_scores_bytes(model: ModelSpec, *, n_tokens: int, n_kv: int) -> int:
    """The f32 KQ scores of one layer without flash attention: n_head x n_kv x n_tokens x 4 B."""
    if model.attention is None:
        return 0
    return model.attention.num_heads * n_kv * n_tokens * F32


def mask_bytes(
    model: ModelSpec, *, n_tokens: int, n_kv: int, flash_attn: bool, fa_mask_f32: bool = False
) -> int:
    """The KQ mask: n_kv x n_tokens, f16 with flash attention (plus the f32 original it is cast from when
    `fa_mask_f32`, builds before b9410), f32 without."""
    if model.attention is None:
        return 0
    if not flash_attn:
        return n_kv * n_tokens * F32
    return n_kv * n_tokens * (2 + (F32 if fa_mask_f32 else 0))


def mla_query_bytes(model: ModelSpec, n_tokens: int) -> int:
    """MLA's absorbed query at its concat (deepseek2.cpp): q_nope_absorbed [kv_lora_rank] + q_pe [rope] + Qcur
    [kv_lora_rank + rope], each per head and token, f32."""
    if model.mla is None or model.attention is None:
        return 0
    latent, rope = model.mla.kv_lora_rank, model.mla.qk_rope_head_dim
    return model.attention.num_heads * (latent + rope + (latent + rope)) * n_tokens * F32


def _attention_bytes(model: ModelSpec, *, n_tokens: int, n_kv: int, flash_attn: bool) -> int:
    """Q, K, V and the attention output of one layer (f32), or MLA's absorbed query, with the scores when flash
    attention is off."""
    a = model.attention
    if a is None:
        return 0
    if model.mla is not None:
        qkv = mla_query_bytes(model, n_tokens)
    else:
        qkv = (2 * a.num_heads + 2 * a.num_kv_heads) * a.head_dim * n_tokens * F32
    return qkv + (0 if flash_attn else attention_scores_bytes(model, n_tokens=n_tokens, n_kv=n_kv))


def _recurrent_scratch(model: ModelSpec, n_tokens: int) -> int:
    """Gated DeltaNet / Mamba intermediates for one ubatch: the conv input and output (q, k, v) and the output
    gate, f32 (calibrated on wide-state qwen35 GGUFs, see docs/planning.md)."""
    la = model.linear_attention
    if la is not None:
        return (2 * la.conv_dim + la.value_dim) * (n_tokens + la.conv_kernel) * F32
    if model.mamba is not None:
        return 4 * model.mamba.d_inner * (n_tokens + model.mamba.d_conv) * F32
    return 0


def _ffn_bytes(model: ModelSpec, n_tokens: int) -> int:
    """Gate, up and the activated product of the widest FFN (the routed experts' k x width for MoE), f32."""
    width = model.intermediate_size
    if model.moe is not None:
        width = max(width, model.moe.experts_per_token * model.moe.expert_intermediate_size)
    return 3 * width * n_tokens * F32


def compute_bytes(
    model: ModelSpec,
    *,
    n_tokens: int,
    n_outputs: int,
    n_kv: int,
    flash_attn: bool,
    pipeline_copies: int = 1,
    fa_mask_f32: bool = False,
) -> int:
    """One device's `compute buffer size` for the worst-case ubatch graph (see the module's rules);
    `pipeline_copies` is SCHED_MAX_COPIES when the scheduler runs a pipeline over several GPUs, else 1;
    `fa_mask_f32`: the build also reserves the f32 mask it casts for flash attention (before b9410)."""
    hidden = model.hidden_size * n_tokens * F32
    logits = model.vocab_size * n_outputs * F32
    layer = max(
        _ffn_bytes(model, n_tokens),
        _attention_bytes(model, n_tokens=n_tokens, n_kv=n_kv, flash_attn=flash_attn),
        _recurrent_scratch(model, n_tokens),
    )
    mask = mask_bytes(model, n_tokens=n_tokens, n_kv=n_kv, flash_attn=flash_attn, fa_mask_f32=fa_mask_f32)
    if pipeline_copies <= 1:  # the mask is freed after the last layer's attention, before the logits
        return max(hidden + logits, 2 * hidden + layer + mask) + GRAPH_OVERHEAD_BYTES
    copies = (pipeline_copies - 1) * (hidden + mask)  # every copy flagged output: live to the end
    return max(hidden + logits, 2 * hidden + layer) + mask + copies + GRAPH_OVERHEAD_BYTES

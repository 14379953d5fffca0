"""A hybrid of llama.cpp's ``qwen35`` architecture: full attention every Nth layer, Gated DeltaNet elsewhere.

Tensor names and shapes follow llama.cpp src/models/qwen35.cpp (load_arch_tensors) of the pinned build:
the GDN key and value head dims both equal ``ssm_state_size``; full-attention ``attn_q`` holds query and gate.
"""

from __future__ import annotations

import gguf

from servelab.modelmake.llama import RMS_EPS, ROPE_BASE, write_ffn, write_transformer_hparams
from servelab.modelmake.shapes import ModelShape
from servelab.modelmake.tensors import TensorSink

ARCH = "qwen35"


def is_full_attention(shape: ModelShape, layer: int) -> bool:
    return (layer + 1) % shape.full_attention_interval == 0


def rope_sections(rope_dim: int) -> list[int]:
    """Four M-RoPE sections summing to half the rope dimension (text-only: all positions equal)."""
    half = rope_dim // 2
    first = half - 2 * (half // 3)
    return [first, half // 3, half // 3, 0]


def write_hparams(writer: gguf.GGUFWriter, shape: ModelShape) -> None:
    write_transformer_hparams(writer, shape)
    writer.add_rope_dimension_sections(rope_sections(shape.head_dim))
    writer.add_rope_freq_base(ROPE_BASE)
    writer.add_layer_norm_rms_eps(RMS_EPS)
    writer.add_ssm_conv_kernel(shape.ssm_conv_kernel)
    writer.add_ssm_inner_size(shape.ssm_state * shape.ssm_value_heads)
    writer.add_ssm_state_size(shape.ssm_state)
    writer.add_ssm_time_step_rank(shape.ssm_value_heads)
    writer.add_ssm_group_count(shape.ssm_key_heads)
    writer.add_full_attention_interval(shape.full_attention_interval)
    writer.add_vocab_size(shape.vocab)


def write_tensors(sink: TensorSink, shape: ModelShape) -> None:
    sink.matrix("token_embd.weight", shape.vocab, shape.hidden)
    for i in range(shape.layers):
        sink.vector(f"blk.{i}.attn_norm.weight", shape.hidden)
        if is_full_attention(shape, i):
            _full_attention(sink, shape, i)
        else:
            _gated_deltanet(sink, shape, i)
        write_ffn(sink, shape, i, norm="post_attention_norm")
    sink.vector("output_norm.weight", shape.hidden)
    sink.matrix("output.weight", shape.vocab, shape.hidden)


def _full_attention(sink: TensorSink, shape: ModelShape, i: int) -> None:
    q_dim, kv_dim = shape.heads * shape.head_dim, shape.kv_heads * shape.head_dim
    sink.matrix(f"blk.{i}.attn_q.weight", 2 * q_dim, shape.hidden)  # query and output gate
    sink.matrix(f"blk.{i}.attn_k.weight", kv_dim, shape.hidden)
    sink.matrix(f"blk.{i}.attn_v.weight", kv_dim, shape.hidden)
    sink.matrix(f"blk.{i}.attn_output.weight", shape.hidden, q_dim)
    sink.vector(f"blk.{i}.attn_q_norm.weight", shape.head_dim)
    sink.vector(f"blk.{i}.attn_k_norm.weight", shape.head_dim)


def _gated_deltanet(sink: TensorSink, shape: ModelShape, i: int) -> None:
    key_dim = shape.ssm_state * shape.ssm_key_heads
    value_dim = shape.ssm_state * shape.ssm_value_heads
    conv_dim = 2 * key_dim + value_dim
    sink.matrix(f"blk.{i}.attn_qkv.weight", conv_dim, shape.hidden)
    sink.matrix(f"blk.{i}.attn_gate.weight", value_dim, shape.hidden)
    sink.matrix(f"blk.{i}.ssm_conv1d.weight", conv_dim, shape.ssm_conv_kernel, keep_f32=True)
    sink.vector(f"blk.{i}.ssm_dt.bias", shape.ssm_value_heads, value=None)
    sink.vector(f"blk.{i}.ssm_a", shape.ssm_value_heads, value=-1.0)
    sink.matrix(f"blk.{i}.ssm_beta.weight", shape.ssm_value_heads, shape.hidden, keep_f32=True)
    sink.matrix(f"blk.{i}.ssm_alpha.weight", shape.ssm_value_heads, shape.hidden, keep_f32=True)
    sink.vector(f"blk.{i}.ssm_norm.weight", shape.ssm_state)
    sink.matrix(f"blk.{i}.ssm_out.weight", shape.hidden, value_dim)

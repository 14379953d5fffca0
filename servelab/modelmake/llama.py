"""A dense GQA model of llama.cpp's ``llama`` architecture (used for the dense, quantized and draft kinds)."""

from __future__ import annotations

import gguf

from servelab.modelmake.shapes import ModelShape
from servelab.modelmake.tensors import TensorSink

ARCH = "llama"
RMS_EPS = 1e-5
ROPE_BASE = 10000.0


def write_hparams(writer: gguf.GGUFWriter, shape: ModelShape) -> None:
    write_transformer_hparams(writer, shape)
    writer.add_rope_freq_base(ROPE_BASE)
    writer.add_layer_norm_rms_eps(RMS_EPS)
    writer.add_vocab_size(shape.vocab)


def write_transformer_hparams(writer: gguf.GGUFWriter, shape: ModelShape) -> None:
    """The keys every transformer architecture here shares: sizes, heads, head dims, rope dimensions."""
    writer.add_context_length(shape.ctx_train)
    writer.add_embedding_length(shape.hidden)
    writer.add_block_count(shape.layers)
    writer.add_feed_forward_length(shape.ffn)
    writer.add_head_count(shape.heads)
    writer.add_head_count_kv(shape.kv_heads)
    writer.add_key_length(shape.head_dim)
    writer.add_value_length(shape.head_dim)
    writer.add_rope_dimension_count(shape.head_dim)


def write_tensors(sink: TensorSink, shape: ModelShape) -> None:
    sink.matrix("token_embd.weight", shape.vocab, shape.hidden)
    for i in range(shape.layers):
        write_attention_block(sink, shape, i)
        write_ffn(sink, shape, i, norm="ffn_norm")
    sink.vector("output_norm.weight", shape.hidden)
    sink.matrix("output.weight", shape.vocab, shape.hidden)


def write_attention_block(sink: TensorSink, shape: ModelShape, i: int) -> None:
    q_dim, kv_dim = shape.heads * shape.head_dim, shape.kv_heads * shape.head_dim
    sink.vector(f"blk.{i}.attn_norm.weight", shape.hidden)
    sink.matrix(f"blk.{i}.attn_q.weight", q_dim, shape.hidden)
    sink.matrix(f"blk.{i}.attn_k.weight", kv_dim, shape.hidden)
    sink.matrix(f"blk.{i}.attn_v.weight", kv_dim, shape.hidden)
    sink.matrix(f"blk.{i}.attn_output.weight", shape.hidden, q_dim)


def write_ffn(sink: TensorSink, shape: ModelShape, i: int, *, norm: str) -> None:
    sink.vector(f"blk.{i}.{norm}.weight", shape.hidden)
    sink.matrix(f"blk.{i}.ffn_gate.weight", shape.ffn, shape.hidden)
    sink.matrix(f"blk.{i}.ffn_up.weight", shape.ffn, shape.hidden)
    sink.matrix(f"blk.{i}.ffn_down.weight", shape.hidden, shape.ffn)

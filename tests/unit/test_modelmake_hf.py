"""Hugging Face model directories the project makes: the safetensors bytes, the tokenizer files, the
planner reading them back exactly, determinism, and the CLI's one-line errors. (transformers itself
loads them in benchmarks/hf_model_check.py; vLLM serves them in the vLLM engine tests.)"""

from __future__ import annotations

import json
import math
import struct

import numpy as np
import pytest

from servelab.cli.app import main
from servelab.errors import ConfigError
from servelab.model import load_model
from servelab.model.safetensors_header import read_file_header
from servelab.model.spec import LayerKind
from servelab.modelmake import HF_KINDS, make_model, shape_for
from servelab.modelmake.safetensors_file import bf16_bytes, write_safetensors
from servelab.modelmake.tokenizer import SPECIAL_TOKENS

FILES = [
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "special_tokens_map.json",
    "tokenizer.json",
    "tokenizer_config.json",
]


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """One model of each kind (made once: about a second each)."""
    root = tmp_path_factory.mktemp("hf")
    return {kind: make_model(kind, root / kind, fmt="hf") for kind in HF_KINDS}


def _json(path):
    return json.loads(path.read_text(encoding="utf-8"))


def _bf16_values(raw: bytes) -> np.ndarray:
    return (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)


def test_bf16_is_the_top_half_of_float32_rounded_to_nearest_even():
    values = np.array([1.0, -2.0, 0.0, 1 + 2**-8, 1 + 3 * 2**-8, 1 + 2**-8 + 2**-20, 3.0e38], np.float32)
    assert list(np.frombuffer(bf16_bytes(values), "<u2")) == [
        0x3F80,  # 1.0
        0xC000,  # -2.0
        0x0000,
        0x3F80,  # a tie rounds to the even mantissa (down)
        0x3F82,  # a tie rounds to the even mantissa (up)
        0x3F81,  # above the tie rounds up
        0x7F62,  # large values stay finite
    ]


def test_safetensors_file_has_the_documented_layout(tmp_path):
    path = tmp_path / "t.safetensors"
    tensors = {"b": np.ones((2, 3), np.float32), "a": np.arange(4, dtype=np.float32)}
    assert write_safetensors(path, tensors, {"format": "pt"}) == 10
    raw = path.read_bytes()
    (length,) = struct.unpack("<Q", raw[:8])
    assert length % 8 == 0
    header = json.loads(raw[8 : 8 + length])
    assert header["__metadata__"] == {"format": "pt"}
    assert header["a"] == {"dtype": "BF16", "shape": [4], "data_offsets": [0, 8]}
    assert header["b"] == {"dtype": "BF16", "shape": [2, 3], "data_offsets": [8, 20]}
    data = raw[8 + length :]
    assert len(data) == 20
    assert list(_bf16_values(data[:8])) == [0.0, 1.0, 2.0, 3.0]
    assert list(_bf16_values(data[8:])) == [1.0] * 6


@pytest.mark.parametrize("kind", HF_KINDS)
def test_the_directory_holds_every_file_and_finite_small_weights(made, kind):
    model = made[kind]
    assert sorted(p.name for p in model.path.iterdir()) == FILES
    assert not model.path.with_name(kind + ".partial").exists()
    assert model.file_bytes == sum(p.stat().st_size for p in model.path.iterdir())
    raw = (model.path / "model.safetensors").read_bytes()
    (length,) = struct.unpack("<Q", raw[:8])
    weights = _bf16_values(raw[8 + length :])
    assert np.isfinite(weights).all()
    assert 0 < float(np.abs(weights).max()) <= 16.0  # norms at 1, A_log up to log(heads), matrices ~0.02


@pytest.mark.parametrize("kind", HF_KINDS)
def test_the_planner_reads_exactly_what_was_written(made, kind):
    model = made[kind]
    config = _json(model.path / "config.json")
    entries = read_file_header(model.path / "model.safetensors")
    spec = load_model(str(model.path))
    assert spec.weights_exact
    assert spec.total_params == sum(math.prod(e.shape) for e in entries) == model.n_params
    assert spec.weight_bytes == 2 * model.n_params  # every tensor BF16
    assert spec.num_layers == config["num_hidden_layers"] == 4
    assert spec.vocab_size == 4096 and spec.max_context == 4096
    assert spec.attention is not None
    assert spec.attention.head_dim == 64 and spec.attention.num_heads == 4
    shapes = {e.name: e.shape for e in entries}
    attn = [i for i in range(4) if f"model.layers.{i}.self_attn.k_proj.weight" in shapes]
    assert spec.kv_heads_per_layer == tuple(2 if i in attn else 0 for i in range(4))
    assert shapes[f"model.layers.{attn[0]}.self_attn.k_proj.weight"] == (2 * 64, 256)


def test_llama_has_the_reference_shape(made):
    spec = load_model(str(made["llama"].path))
    assert spec.layer_kinds == (LayerKind.FULL_ATTENTION,) * 4
    assert spec.total_params == 5_245_184  # docs/reference/vllm-cpu.md §2: the Llama vLLM CPU served


def test_qwen3_next_layers_and_state_dims(made):
    model = made["qwen3-next"]
    spec = load_model(str(model.path))
    shapes = {e.name: e.shape for e in read_file_header(model.path / "model.safetensors")}
    assert spec.layer_kinds == (LayerKind.LINEAR_ATTENTION,) * 3 + (LayerKind.FULL_ATTENTION,)
    la = spec.linear_attention
    assert la is not None
    assert (la.num_key_heads, la.num_value_heads, la.key_head_dim, la.value_head_dim) == (2, 4, 64, 64)
    assert shapes["model.layers.0.linear_attn.conv1d.weight"] == (la.conv_dim, 1, la.conv_kernel)
    assert shapes["model.layers.0.linear_attn.in_proj_qkvz.weight"] == (
        2 * la.key_dim + 2 * la.value_dim,
        256,
    )
    assert shapes["model.layers.3.self_attn.q_proj.weight"] == (2 * 4 * 64, 256)  # query and gate
    assert spec.moe is not None and (spec.moe.num_experts, spec.moe.experts_per_token) == (4, 2)
    assert spec.moe.num_moe_layers == 4
    assert shapes["model.layers.2.mlp.experts.3.down_proj.weight"] == (256, spec.moe.expert_intermediate_size)


def test_granite_hybrid_layers_and_mamba_dims(made):
    model = made["granite-hybrid"]
    config = _json(model.path / "config.json")
    spec = load_model(str(model.path))
    shapes = {e.name: e.shape for e in read_file_header(model.path / "model.safetensors")}
    assert config["layer_types"] == ["mamba", "mamba", "mamba", "attention"]
    assert config["num_local_experts"] == 0 and spec.moe is None
    assert spec.layer_kinds == (LayerKind.MAMBA,) * 3 + (LayerKind.FULL_ATTENTION,)
    m = spec.mamba
    assert m is not None
    assert (m.d_inner, m.d_state, m.d_conv, m.n_groups, m.n_heads) == (512, 64, 4, 1, 8)
    assert config["mamba_d_head"] * config["mamba_n_heads"] == m.d_inner
    assert shapes["model.layers.0.mamba.conv1d.weight"] == (m.conv_dim, 1, m.d_conv)
    assert shapes["model.layers.0.mamba.in_proj.weight"] == (2 * m.d_inner + 2 * m.d_state + m.n_heads, 256)


@pytest.mark.parametrize("kind", HF_KINDS)
def test_tokenizer_files_agree_with_each_other_and_the_config(made, kind):
    model = made[kind]
    config = _json(model.path / "config.json")
    tok = _json(model.path / "tokenizer.json")
    tok_config = _json(model.path / "tokenizer_config.json")
    vocab = tok["model"]["vocab"]
    assert tok["model"]["type"] == "BPE"
    assert tok["pre_tokenizer"]["type"] == tok["decoder"]["type"] == "ByteLevel"
    assert len(vocab) == config["vocab_size"] and sorted(vocab.values()) == list(range(len(vocab)))
    for left, right in tok["model"]["merges"]:
        assert left in vocab and right in vocab and left + right in vocab
    added = {t["content"]: t["id"] for t in tok["added_tokens"]}
    assert added == {t: vocab[t] for t in SPECIAL_TOKENS}
    assert config["eos_token_id"] == vocab["<|im_end|>"] == added[tok_config["eos_token"]]
    assert config["bos_token_id"] == config["pad_token_id"] == vocab["<|endoftext|>"]
    assert "<|im_start|>" in tok_config["chat_template"] and tok_config["model_max_length"] == 4096
    assert _json(model.path / "special_tokens_map.json")["eos_token"] == "<|im_end|>"
    assert _json(model.path / "generation_config.json")["eos_token_id"] == config["eos_token_id"]


def test_same_seed_same_bytes_other_seed_other_weights(tmp_path):
    shape = shape_for("qwen3-next", "hf", vocab=512)
    a = make_model("qwen3-next", tmp_path / "a", shape, "hf")
    b = make_model("qwen3-next", tmp_path / "b", shape, "hf")
    for name in FILES:
        assert (a.path / name).read_bytes() == (b.path / name).read_bytes(), name
    c = make_model("qwen3-next", tmp_path / "c", shape_for("qwen3-next", "hf", vocab=512, seed=1), "hf")
    assert (c.path / "model.safetensors").read_bytes() != (a.path / "model.safetensors").read_bytes()
    assert (c.path / "tokenizer.json").read_bytes() == (a.path / "tokenizer.json").read_bytes()


def test_shape_options_reach_the_config(tmp_path):
    shape = shape_for("llama", "hf", layers=2, hidden=128, heads=2, kv_heads=1, ffn=256, vocab=300)
    model = make_model("llama", tmp_path / "m", shape, "hf")
    spec = load_model(str(model.path))
    assert (spec.num_layers, spec.hidden_size, spec.vocab_size) == (2, 128, 300)
    assert spec.kv_heads_per_layer == (1, 1) and spec.intermediate_size == 256
    assert spec.total_params == model.n_params


@pytest.mark.parametrize(
    ("kind", "overrides", "message"),
    [
        ("granite-hybrid", {"head_dim": 32}, "heads x head_dim = hidden"),
        ("granite-hybrid", {"ssm_value_heads": 7}, "must divide 2 x hidden"),
        ("qwen3-next", {"layers": 3}, "at least 4 layers"),
        ("qwen3-next", {"experts_per_token": 5}, "exceeds experts"),
        ("llama", {"weight_type": "f16"}, "choose one of: bf16"),
    ],
)
def test_bad_hf_shapes_are_refused(kind, overrides, message):
    with pytest.raises(ConfigError, match=message):
        shape_for(kind, "hf", **overrides)


def test_cli_writes_a_directory_and_prints_json(tmp_path, capsys):
    out = tmp_path / "tiny"
    args = ["model", "make", "granite-hybrid", "--format", "hf", "-o", str(out), "--vocab", "300", "--json"]
    assert main(args) == 0
    captured = capsys.readouterr()
    result = json.loads(captured.out)
    assert result["architecture"] == "GraniteMoeHybridForCausalLM" and result["weight_type"] == "bf16"
    assert result["n_params"] == load_model(str(out)).total_params
    assert captured.err == ""


@pytest.mark.parametrize(
    ("setup", "args", "message"),
    [
        ("file", ["llama"], "is a file; --format hf writes a directory"),
        ("full", ["llama"], "already exists and is not empty"),
        (None, ["dense"], "unknown model kind 'dense'; choose one of: llama, qwen3-next, granite-hybrid"),
        (None, ["llama", "--format", "onnx"], "unknown model format 'onnx'; choose gguf or hf"),
    ],
)
def test_cli_bad_input_is_one_line_and_exit_2(tmp_path, capsys, setup, args, message):
    out = tmp_path / "out"
    if setup == "file":
        out.write_text("not a model")
    elif setup == "full":
        out.mkdir()
        (out / "keep.txt").write_text("mine")
    before = sorted(p.name for p in tmp_path.rglob("*"))
    fmt = [] if "--format" in args else ["--format", "hf"]
    assert main(["model", "make", *args, *fmt, "-o", str(out)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and message in captured.err and captured.err.count("\n") == 1
    assert sorted(p.name for p in tmp_path.rglob("*")) == before  # nothing written, nothing removed


def test_an_empty_directory_is_filled_and_a_failed_write_leaves_nothing(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert make_model("llama", empty, shape_for("llama", "hf", vocab=300), "hf").path == empty
    assert sorted(p.name for p in empty.iterdir()) == FILES
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where a parent directory should be")
    with pytest.raises(ConfigError, match="cannot write model to"):
        make_model("llama", blocker / "m", shape_for("llama", "hf", vocab=300), "hf")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["blocker", "empty"]

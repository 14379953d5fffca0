"""The model maker: tokenizer training, shape checks, and the GGUF files read back with gguf's own reader."""

from __future__ import annotations

import json

import gguf
import pytest

from servelab.cli.app import main
from servelab.errors import ConfigError
from servelab.modelmake import make_model, shape_for
from servelab.modelmake.qwen35 import rope_sections
from servelab.modelmake.tokenizer import SPECIAL_TOKENS, byte_symbols, train_vocabulary


def _field(reader: gguf.GGUFReader, key: str):
    return reader.fields[key].contents()


def test_byte_symbols_are_a_bijection_of_the_256_bytes():
    symbols = byte_symbols()
    assert len(set(symbols)) == 256
    assert symbols[ord("A")] == "A" and symbols[ord(" ")] == "Ġ"  # GPT-2's printable map


def test_vocabulary_has_the_asked_size_and_every_merge_joins_known_tokens():
    vocab = train_vocabulary(400)
    assert vocab.size == 400
    assert vocab.tokens[-len(SPECIAL_TOKENS) :] == SPECIAL_TOKENS
    known = set(vocab.tokens)
    for merge in vocab.merges:
        left, right = merge.split(" ")
        assert left in known and right in known and left + right in known
    assert "Ġthe" in known  # learned from the corpus, not padded
    assert train_vocabulary(400) == vocab  # deterministic


def test_too_small_vocabulary_is_refused():
    with pytest.raises(ConfigError, match="at least 259"):
        train_vocabulary(100)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"heads": 3, "kv_heads": 2}, "multiple of kv_heads"),
        ({"layers": 0}, "layers must be a positive integer"),
        ({"weight_type": "q8_0", "hidden": 48}, "multiples of 32"),
        ({"weight_type": "bf8"}, "choose one of: f32, f16, q8_0, q4_0"),
        ({"seed": -1}, "seed must be 0 or more"),
        ({"hidden": 100_000_000}, "too big to make here"),
    ],
)
def test_bad_shapes_are_refused_with_the_reason(overrides, message):
    with pytest.raises(ConfigError, match=message):
        shape_for("dense", **overrides)


def test_hybrid_needs_a_full_attention_layer():
    with pytest.raises(ConfigError, match="at least 4 layers"):
        shape_for("hybrid", layers=3)


def test_rope_sections_sum_to_half_the_rope_dimension():
    assert sum(rope_sections(32)) == 16 and len(rope_sections(32)) == 4


def test_dense_model_reads_back(tmp_path):
    made = make_model("dense", tmp_path / "d.gguf", shape_for("dense", ctx_train=3000))
    reader = gguf.GGUFReader(made.path)
    assert _field(reader, "general.architecture") == "llama"
    assert _field(reader, "llama.context_length") == 3000
    assert _field(reader, "llama.attention.head_count_kv") == 2
    assert _field(reader, "tokenizer.ggml.model") == "gpt2"
    assert len(_field(reader, "tokenizer.ggml.tokens")) == 512
    names = {t.name for t in reader.tensors}
    assert {"token_embd.weight", "output.weight", "blk.3.ffn_down.weight"} <= names
    assert sum(int(t.n_elements) for t in reader.tensors) == made.n_params


def test_hybrid_puts_full_attention_on_every_fourth_layer(tmp_path):
    reader = gguf.GGUFReader(make_model("hybrid", tmp_path / "h.gguf").path)
    names = {t.name for t in reader.tensors}
    assert _field(reader, "general.architecture") == "qwen35"
    full = sorted(int(n.split(".")[1]) for n in names if n.endswith("attn_k.weight"))
    linear = sorted(int(n.split(".")[1]) for n in names if n.endswith("ssm_conv1d.weight"))
    assert full == [3, 7]
    assert linear == [0, 1, 2, 4, 5, 6]
    assert "blk.0.ssm_a" in names
    q = next(t for t in reader.tensors if t.name == "blk.3.attn_q.weight")
    assert list(q.shape) == [128, 2 * 4 * 32]  # ggml order (in, out): query and gate


def test_quantized_model_has_q8_0_and_q4_0_matrices_and_f32_norms(tmp_path):
    for weight_type, qtype in (
        ("q8_0", gguf.GGMLQuantizationType.Q8_0),
        ("q4_0", gguf.GGMLQuantizationType.Q4_0),
    ):
        made = make_model(
            "quantized", tmp_path / f"{weight_type}.gguf", shape_for("quantized", weight_type=weight_type)
        )
        types = {t.name: t.tensor_type for t in gguf.GGUFReader(made.path).tensors}
        assert types["blk.0.attn_q.weight"] == qtype
        assert types["blk.0.attn_norm.weight"] == gguf.GGMLQuantizationType.F32


def test_same_seed_same_bytes_and_no_partial_file_left(tmp_path):
    a = make_model("draft", tmp_path / "a.gguf")
    b = make_model("draft", tmp_path / "b.gguf")
    assert a.path.read_bytes() == b.path.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.gguf", "b.gguf"]


def test_cli_model_make_json(tmp_path, capsys):
    out = tmp_path / "m.gguf"
    assert (
        main(["model", "make", "hybrid", "-o", str(out), "--layers", "4", "--ctx-train", "1024", "--json"])
        == 0
    )
    captured = capsys.readouterr()
    result = json.loads(captured.out)
    assert result["architecture"] == "qwen35" and result["shape"]["layers"] == 4
    assert result["file_bytes"] == out.stat().st_size
    assert captured.err == ""


def test_cli_model_make_unknown_kind_is_a_usage_error(tmp_path, capsys):
    assert main(["model", "make", "moe", "-o", str(tmp_path / "m.gguf")]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert (
        captured.err.strip()
        == "servelab: error: unknown model kind 'moe'; choose one of: dense, hybrid, quantized, draft"
    )
    assert not (tmp_path / "m.gguf").exists()


@pytest.mark.parametrize("output", ["", "."])
def test_an_output_that_is_not_a_file_name_is_a_usage_error(output, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["model", "make", "dense", "-o", output]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "is not a file name" in err and err.count("\n") == 1

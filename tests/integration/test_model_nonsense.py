"""Architectures that could not run are refused with the field named, from config.json or GGUF (issue 26.5):
zero or negative heads, feed-forward size, vocabulary, layers or hidden size, and more KV heads than heads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servelab.cli.app import main
from tests.unit.model_files import write_gguf

CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 1000,
    "max_position_embeddings": 4096,
}

EMBEDDING = [("token_embd.weight", (128, 1000), 0, 128 * 1000 * 4)]
OUTPUT_ONLY = [("output.weight", (128, 1000), 0, 128 * 1000 * 4)]


def _plan(path: Path, capsys) -> tuple[int, str]:
    engine = "llamacpp" if path.suffix == ".gguf" else "vllm"
    code = main(["plan", str(path), "--gpu", "rtx4090", "--engine", engine, "--context", "4096"])
    captured = capsys.readouterr()
    return code, captured.err


@pytest.mark.parametrize(
    "key, value, named",
    [
        ("num_attention_heads", 0, "attention head count is 0"),
        ("num_attention_heads", -4, "num_heads is -4"),
        ("intermediate_size", 0, "feed-forward size is 0"),
        ("intermediate_size", -1, "intermediate_size is -1"),
        ("vocab_size", 0, "vocabulary size is 0"),
        ("vocab_size", -5, "vocab_size is -5"),
        ("num_hidden_layers", 0, "num_hidden_layers 0"),
        ("hidden_size", 0, "hidden_size 0"),
        ("hidden_size", -256, "hidden_size -256"),
        ("num_key_value_heads", 8, "KV head count of layer 0 is 8; it must lie in 1..4"),
    ],
)
def test_a_nonsense_config_json_is_refused_naming_the_field(
    key, value, named, tmp_path: Path, capsys
) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**CONFIG, key: value}))
    code, err = _plan(path, capsys)
    assert code in (1, 2) and err.count("\n") == 1 and "Traceback" not in err
    assert named in err, err


def _gguf_kvs(**changed: object) -> dict[str, object]:
    kvs = {
        "general.architecture": "llama",
        "llama.block_count": 2,
        "llama.embedding_length": 128,
        "llama.context_length": 4096,
        "llama.attention.head_count": 4,
        "llama.attention.head_count_kv": 2,
        "llama.feed_forward_length": 256,
        "llama.vocab_size": 1000,
    }
    kvs.update(changed)
    return {k: v for k, v in kvs.items() if v is not None}


@pytest.mark.parametrize(
    "changed, named",
    [
        ({"llama.attention.head_count": 0}, "attention head count is 0"),
        ({"llama.feed_forward_length": 0}, "feed-forward size is 0"),
        ({"llama.vocab_size": None}, "vocabulary size is 0"),
        ({"llama.attention.head_count_kv": 8}, "KV head count of layer 0 is 8; it must lie in 1..4"),
        ({"llama.attention.head_count_kv": [2, 6]}, "KV head count of layer 1 is 6; it must lie in 1..4"),
    ],
    ids=["heads", "ffn", "vocab", "kv-over-heads", "kv-per-layer"],
)
def test_a_nonsense_gguf_is_refused_naming_the_field(changed, named, tmp_path: Path, capsys) -> None:
    path = tmp_path / "m.gguf"
    tensors = (
        OUTPUT_ONLY if "llama.vocab_size" in changed else EMBEDDING
    )  # the embedding would give the vocabulary
    write_gguf(path, _gguf_kvs(**changed), tensors)
    code, err = _plan(path, capsys)
    assert code in (1, 2) and err.count("\n") == 1 and "Traceback" not in err
    assert named in err, err


def test_a_sane_model_still_plans(tmp_path: Path, capsys) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(CONFIG))
    assert _plan(path, capsys)[0] == 0
    write_gguf(tmp_path / "m.gguf", _gguf_kvs(), EMBEDDING)
    assert _plan(tmp_path / "m.gguf", capsys)[0] == 0

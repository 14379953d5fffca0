"""Safetensors headers → exact bytes per component; hostile headers fail with ModelFormatError, fast."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from servelab.errors import ModelFormatError
from servelab.model import load_model
from servelab.model.safetensors_header import component_of, read_file_header
from tests.unit.model_files import write_safetensors

CONFIG = {
    "model_type": "qwen3",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "vocab_size": 100,
    "max_position_embeddings": 4096,
    "num_nextn_predict_layers": 1,
    "vision_config": {"hidden_size": 32, "depth": 1, "patch_size": 2},
}


def _model_dir(root: Path) -> Path:
    (root / "config.json").write_text(json.dumps(CONFIG))
    shard1 = {
        "model.embed_tokens.weight": ("BF16", (100, 64)),
        "model.layers.0.self_attn.q_proj.weight": ("BF16", (64, 64)),
        "model.layers.0.mlp.down_proj.qweight": ("I32", (16, 64)),
    }
    shard2 = {
        "lm_head.weight": ("BF16", (100, 64)),
        "model.layers.1.input_layernorm.weight": ("F32", (64,)),
        "model.layers.2.eh_proj.weight": ("F8_E4M3", (64, 128)),
        "model.visual.blocks.0.attn.qkv.weight": ("F16", (96, 32)),
    }
    write_safetensors(root / "model-00001-of-00002.safetensors", shard1)
    write_safetensors(root / "model-00002-of-00002.safetensors", shard2)
    weight_map = {name: "model-00001-of-00002.safetensors" for name in shard1}
    weight_map.update({name: "model-00002-of-00002.safetensors" for name in shard2})
    (root / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return root


def test_sharded_directory_exact_bytes(tmp_path: Path) -> None:
    spec = load_model(str(_model_dir(tmp_path)))
    assert spec.weights_exact and spec.source == "hf"
    by_name = {w.name: w.bytes for w in spec.weights}
    assert by_name == {
        "embedding": 12_800,
        "lm_head": 12_800,
        "text": 64 * 64 * 2 + 16 * 64 * 4 + 64 * 4,
        "mtp": 64 * 128,
        "vision": 96 * 32 * 2,
    }
    assert (
        spec.weight_group("text").params == spec.extra["param_groups"]["text"][0]
    )  # params stay architectural


def test_config_json_path_reads_sibling_shards(tmp_path: Path) -> None:
    directory = _model_dir(tmp_path)
    assert load_model(str(directory / "config.json")).weight_bytes == load_model(str(directory)).weight_bytes


def test_config_without_weights_is_priced_from_counts(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(CONFIG))
    spec = load_model(str(tmp_path / "config.json"))
    assert not spec.weights_exact and spec.weight_group("embedding").bytes == 12_800


@pytest.mark.parametrize(
    ("name", "group"),
    [
        ("model.embed_tokens.weight", "embedding"),
        ("lm_head.weight", "lm_head"),
        ("mtp.fc.weight", "mtp"),
        ("model.layers.61.eh_proj.weight", "mtp"),
        ("model.layers.60.mlp.experts.0.up_proj.weight", "text"),
        ("model.visual.merger.mlp.0.weight", "vision"),
        ("vision_tower.encoder.layers.0.fc1.weight", "vision"),
        ("model.language_model.embed_tokens.weight", "embedding"),
        ("model.norm.weight", "text"),
    ],
)
def test_component_by_name(name: str, group: str) -> None:
    assert component_of(name, 61) == group


def _raw(path: Path, header: bytes, declared: int | None = None, data: bytes = b"") -> Path:
    path.write_bytes(struct.pack("<Q", len(header) if declared is None else declared) + header + data)
    return path


def _entry(offsets: list[int], dtype: str = "F32", shape: list[int] | None = None) -> bytes:
    return json.dumps({"t": {"dtype": dtype, "shape": shape or [2], "data_offsets": offsets}}).encode()


@pytest.mark.parametrize(
    ("header", "declared", "data", "message"),
    [
        (b"{}", 10**15, b"", "header length 1000000000000000 does not fit"),
        (b"not json", None, b"", "header is not JSON"),
        (b"[1]", None, b"", "not a JSON object"),
        (
            b"[" * 100_000 + b"]" * 100_000,
            None,
            b"",
            "header is not JSON",
        ),  # nesting deeper than the parser's stack
        (_entry([0, 8]), None, b"\0" * 4, "lies outside the file"),
        (_entry([0, 8]), None, b"\0" * 8 + b"", None),
        (_entry([0, 4]), None, b"\0" * 8, "needs 8 bytes, offsets give 4"),
        (_entry([0, 8], dtype="Q9"), None, b"\0" * 8, "unknown dtype 'Q9'"),
        (json.dumps({"t": {"dtype": "F32"}}).encode(), None, b"", "malformed entry"),
    ],
)
def test_hostile_headers(
    tmp_path: Path, header: bytes, declared: int | None, data: bytes, message: str | None
) -> None:
    path = _raw(tmp_path / "x.safetensors", header, declared, data)
    if message is None:
        assert read_file_header(path)[0].nbytes == 8
        return
    with pytest.raises(ModelFormatError, match=message):
        read_file_header(path)


def test_short_file_and_bad_index(tmp_path: Path) -> None:
    (tmp_path / "tiny.safetensors").write_bytes(b"\x01\x02")
    with pytest.raises(ModelFormatError, match="too short"):
        read_file_header(tmp_path / "tiny.safetensors")
    (tmp_path / "config.json").write_text(json.dumps(CONFIG))
    index = tmp_path / "model.safetensors.index.json"
    index.write_text(json.dumps({"weight_map": {"a": "../../etc/passwd"}}))
    with pytest.raises(ModelFormatError, match="shard file names"):
        load_model(str(tmp_path))
    index.write_text(json.dumps({"weight_map": {"a": "missing.safetensors"}}))
    with pytest.raises(ModelFormatError, match=r"lists missing\.safetensors which is not in"):
        load_model(str(tmp_path))


def test_an_index_naming_more_shards_than_any_model_is_refused_before_any_read(tmp_path: Path) -> None:
    from servelab.model.safetensors_header import MAX_SHARDS, shard_files, shard_names

    many = {f"t{i}": f"s{i}.safetensors" for i in range(MAX_SHARDS + 1)}
    raw = json.dumps({"weight_map": many}).encode()
    with pytest.raises(ModelFormatError, match=f"names {MAX_SHARDS + 1} shard files"):
        shard_names(raw)
    assert len(shard_names(json.dumps({"weight_map": dict(list(many.items())[:163])}).encode())) == 163
    (tmp_path / "model.safetensors.index.json").write_bytes(raw)
    with pytest.raises(ModelFormatError, match="not a model index"):
        shard_files(tmp_path)  # refused before it looks for a single shard

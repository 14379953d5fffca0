"""The model readers cannot be turned against us: hostile GGUF headers, safetensors headers and config.json
files end in a model or one clean error (ModelFormatError / ConfigError), never a traceback, a hang or an
unbounded allocation. Property tests run a fixed, derandomized budget so CI sees the same cases every run."""

from __future__ import annotations

import json
import os
import random
import struct
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from servelab.cli.app import main
from servelab.errors import ConfigError, ModelFormatError
from servelab.model.gguf_header import MAX_ARRAY_DEPTH, MAX_KEPT_ITEMS, read_gguf_header
from servelab.model.load import load_model
from servelab.model.safetensors_header import parse_header, read_file_header
from servelab.model.spec import ModelSpec
from servelab.modelmake import make_model
from tests.unit.model_files import gguf_string
from tests.unit.model_mutants import (
    ARRAY,
    F32,
    GGUF_KEYS,
    I32,
    I64,
    SEED_CONFIG,
    STRING,
    GGUFSeed,
    mutate_gguf,
    mutate_model_dir,
    pack_gguf,
    parse_gguf,
    seed_tensors,
    write_model_dir,
)

BUDGET = settings(
    max_examples=200,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.fixture(scope="module")
def seeds(tmp_path_factory: pytest.TempPathFactory) -> list[GGUFSeed]:
    work = tmp_path_factory.mktemp("seeds")
    return [
        parse_gguf(make_model(kind, work / f"{kind}.gguf").path.read_bytes()) for kind in ("draft", "hybrid")
    ]


def outcome(ref: Path) -> str:
    """'ok' for a sane ModelSpec, 'clean' for one servelab error line; anything else fails the test."""
    try:
        spec = load_model(str(ref))
    except (ModelFormatError, ConfigError) as exc:
        assert "\n" not in str(exc)
        return "clean"
    assert isinstance(spec, ModelSpec)
    assert spec.hidden_size > 0 and spec.num_layers > 0 and min(spec.kv_heads_per_layer) >= 0
    assert spec.weight_bytes >= 0
    return "ok"


def test_the_seeds_load(seeds, tmp_path):
    for i, seed in enumerate(seeds):
        path = tmp_path / f"seed{i}.gguf"
        path.write_bytes(pack_gguf(seed) + b"\0" * seed.data_bytes)
        assert outcome(path) == "ok"
    assert (
        outcome(write_model_dir(tmp_path / "dir", json.dumps(SEED_CONFIG).encode(), _seed_safetensors()))
        == "ok"
    )


@BUDGET
@given(rng=st.randoms(use_true_random=False))
def test_mutated_gguf_headers_end_clean(seeds, tmp_path, rng):
    path = tmp_path / "case.gguf"
    path.write_bytes(mutate_gguf(rng.choice(seeds), rng))
    outcome(path)


_GGUF_VALUES = st.one_of(
    st.tuples(st.just(I64), st.integers(-(2**63), 2**63 - 1)),
    st.tuples(st.just(I32), st.integers(-(2**31), 2**31 - 1)),
    st.tuples(st.just(F32), st.floats(width=32)),
    st.tuples(st.just(STRING), st.text(max_size=20)),
    st.tuples(
        st.just(ARRAY), st.tuples(st.just(I32), st.lists(st.integers(-(2**31), 2**31 - 1), max_size=12))
    ),
)


@BUDGET
@given(key=st.sampled_from(GGUF_KEYS), typed=_GGUF_VALUES, which=st.integers(0, 1))
def test_any_value_of_any_numeric_key_ends_clean(seeds, tmp_path, key, typed, which):
    seed = seeds[which]
    name = key.format(a=seed.arch)
    kvs = [kv for kv in seed.kvs if kv[0] != name] + [[name, *typed]]
    path = tmp_path / "case.gguf"
    path.write_bytes(pack_gguf(replace(seed, kvs=kvs)) + b"\0" * seed.data_bytes)
    outcome(path)


@BUDGET
@given(rng=st.randoms(use_true_random=False))
def test_mutated_safetensors_headers_end_clean(tmp_path, rng):
    outcome(write_model_dir(tmp_path / "dir", *mutate_model_dir(rng, "safetensors")))


@BUDGET
@given(rng=st.randoms(use_true_random=False))
def test_mutated_configs_end_clean(tmp_path, rng):
    outcome(write_model_dir(tmp_path / "dir", *mutate_model_dir(rng, "config")))


_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)


@BUDGET
@given(
    key=st.sampled_from([*sorted(SEED_CONFIG), "head_dim", "num_experts", "kv_lora_rank"]), value=_JSON_VALUES
)
def test_any_json_value_of_a_config_field_ends_clean(tmp_path, key, value):
    config = dict(SEED_CONFIG) | {key: value}
    outcome(write_model_dir(tmp_path / "dir", json.dumps(config).encode(), _seed_safetensors()))


def _seed_safetensors() -> bytes:
    header = json.dumps(seed_tensors(SEED_CONFIG)).encode()
    data = max(e["data_offsets"][1] for n, e in seed_tensors(SEED_CONFIG).items() if n != "__metadata__")
    return struct.pack("<Q", len(header)) + header + b"\0" * data


# ---- the reported cases, one each ---------------------------------------------------------------------------


def test_a_fifo_named_model_safetensors_is_refused_not_waited_on(tmp_path):
    write_model_dir(tmp_path, json.dumps(SEED_CONFIG).encode(), b"")
    (tmp_path / "model.safetensors").unlink()
    os.mkfifo(tmp_path / "model.safetensors")
    with pytest.raises(ModelFormatError, match="not a regular file"):
        load_model(str(tmp_path))
    with pytest.raises(ModelFormatError, match="not a regular file"):
        read_file_header(tmp_path / "model.safetensors")


def test_a_fifo_or_device_is_not_a_gguf_file(tmp_path):
    os.mkfifo(tmp_path / "pipe.gguf")
    for path in (tmp_path / "pipe.gguf", Path("/dev/zero")):
        with pytest.raises(ModelFormatError, match="not a regular file"):
            read_gguf_header(path)


def test_load_model_names_a_fifo_or_device_as_not_a_regular_file(tmp_path):
    os.mkfifo(tmp_path / "pipe.gguf")
    for ref in (str(tmp_path / "pipe.gguf"), "/dev/null"):
        with pytest.raises(ModelFormatError, match="not a regular file"):
            load_model(ref)


def _gguf(tmp_path: Path, entries: bytes, n_kv: int) -> Path:
    path = tmp_path / "m.gguf"
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, n_kv) + entries + b"\0" * 64)
    return path


def test_arrays_nested_past_the_limit_are_refused(tmp_path):
    body = struct.pack("<IQ", ARRAY, 1) * 10_000 + struct.pack("<IQi", I32, 1, -1)
    path = _gguf(tmp_path, gguf_string("deep") + struct.pack("<I", ARRAY) + body, 1)
    with pytest.raises(ModelFormatError, match=f"deeper than {MAX_ARRAY_DEPTH}"):
        read_gguf_header(path)


def test_many_small_arrays_are_refused_before_they_fill_memory(tmp_path):
    one = struct.pack("<IIQ", ARRAY, 0, 4096) + b"\0" * 4096
    n = MAX_KEPT_ITEMS // 4096 + 1
    path = _gguf(tmp_path, b"".join(gguf_string(f"k{i}") + one for i in range(n)), n)
    with pytest.raises(ModelFormatError, match="short-array items"):
        read_gguf_header(path)


def test_overlapping_gguf_tensors_are_refused(seeds, tmp_path):
    seed = replace(seeds[0], tensors=[list(t) for t in seeds[0].tensors])
    seed.tensors[1][3] = seed.tensors[0][3]  # the second tensor starts where the first does
    path = tmp_path / "m.gguf"
    path.write_bytes(pack_gguf(seed) + b"\0" * seed.data_bytes)
    with pytest.raises(ModelFormatError, match="overlap"):
        read_gguf_header(path)


def test_overlapping_safetensors_offsets_are_refused():
    entry = {"dtype": "BF16", "shape": [4], "data_offsets": [0, 8]}
    with pytest.raises(ModelFormatError, match="overlap"):
        parse_header(json.dumps({"a": entry, "b": entry}).encode(), 8)


@pytest.mark.parametrize(
    ("field", "value"),
    [("hidden_size", -128), ("hidden_size", 0), ("num_attention_heads", -4), ("num_key_value_heads", -2)],
)
def test_nonsense_dimensions_are_one_line_from_the_cli(tmp_path, capsys, field, value):
    config = dict(SEED_CONFIG) | {field: value}
    write_model_dir(tmp_path, json.dumps(config).encode(), _seed_safetensors())
    code = main(["plan", str(tmp_path), "--gpu", "h100"])
    out, err = capsys.readouterr()
    assert code == 1 and out == ""
    assert err.startswith("servelab: ") and err.count("\n") == 1 and "Traceback" not in err


def test_a_hybrid_gguf_without_its_value_head_count_is_one_line(seeds, tmp_path):
    hybrid = seeds[1]
    kvs = [kv for kv in hybrid.kvs if kv[0] != f"{hybrid.arch}.ssm.time_step_rank"]
    path = tmp_path / "m.gguf"
    path.write_bytes(pack_gguf(replace(hybrid, kvs=kvs)) + b"\0" * hybrid.data_bytes)
    with pytest.raises(ModelFormatError, match=r"ssm\.time_step_rank is missing"):
        load_model(str(path))


def test_a_gguf_without_tensors_loads_but_is_not_planned(seeds, tmp_path, capsys):
    path = tmp_path / "empty.gguf"
    path.write_bytes(pack_gguf(replace(seeds[0], tensors=[])))
    assert load_model(str(path)).weight_bytes == 0
    code = main(["plan", str(path), "--gpu", "h100"])
    out, err = capsys.readouterr()
    assert code == 1 and out == ""
    assert "has no weights" in err and err.count("\n") == 1 and "Traceback" not in err


def test_a_4300_digit_number_in_a_config_is_one_line(tmp_path):
    text = json.dumps(SEED_CONFIG).replace("64", "9" * 5000, 1)
    with pytest.raises(ModelFormatError, match=r"config\.json"):
        load_model(str(write_model_dir(tmp_path, text.encode(), _seed_safetensors())))


def test_the_mutator_is_deterministic(seeds):
    assert mutate_gguf(seeds[0], random.Random(7)) == mutate_gguf(seeds[0], random.Random(7))


@pytest.mark.parametrize(
    "key", ["num_attention_heads", "num_key_value_heads", "vocab_size", "intermediate_size"]
)
@pytest.mark.parametrize("value", ["4", True, 2.5, "0x10"])
def test_a_config_number_that_is_not_a_whole_number_is_refused_not_coerced(tmp_path, key, value):
    """``"4"`` read as 4, ``true`` as 1 and ``2.5`` as 2 would plan a model nobody wrote; refused in one line."""
    config = dict(SEED_CONFIG) | {key: value}
    ref = write_model_dir(tmp_path / "dir", json.dumps(config).encode(), _seed_safetensors())
    with pytest.raises(ModelFormatError, match="is not a whole number"):
        load_model(str(ref))


def test_a_whole_float_in_a_config_is_read_as_the_number(tmp_path):
    config = dict(SEED_CONFIG) | {"num_key_value_heads": 2.0, "max_position_embeddings": 2048.0}
    spec = load_model(
        str(write_model_dir(tmp_path / "dir", json.dumps(config).encode(), _seed_safetensors()))
    )
    assert spec.attention.num_kv_heads == 2 and spec.max_context == 2048

"""GGUF → ModelSpec: the project's own llama/qwen35 models (servelab.modelmake, written with gguf.GGUFWriter),
hand-laid files for fork types, MoE, MTP and SWA, and hostile files that must fail fast with ModelFormatError."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from servelab.errors import ConfigError, ModelFormatError
from servelab.model import load_model
from servelab.model.gguf_file import read_gguf
from servelab.model.gguf_header import read_gguf_header
from servelab.model.spec import LayerKind
from servelab.modelmake import make_model
from tests.unit.model_files import gguf_string, write_gguf


@pytest.fixture(scope="module")
def hybrid(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_model("hybrid", tmp_path_factory.mktemp("gguf") / "hybrid.gguf").path


def test_qwen35_hybrid_layers_and_state(hybrid: Path) -> None:
    spec = load_model(str(hybrid))
    # docs/reference/llamacpp-local.md §2: 8 layers, full attention every 4th, 2 KV heads × 32, GDN head dim 16, 2 K / 4 V heads
    assert [i for i, k in enumerate(spec.layer_kinds) if k == LayerKind.FULL_ATTENTION] == [3, 7]
    assert spec.kv_heads_per_layer == (0, 0, 0, 2, 0, 0, 0, 2) and spec.attention.head_dim == 32
    la = spec.linear_attention
    assert (la.num_key_heads, la.num_value_heads, la.key_head_dim, la.value_head_dim, la.conv_kernel) == (
        2,
        4,
        16,
        16,
        4,
    )
    assert la.conv_dim == 128  # llama.cpp log: R = 3 × 128 f32 per layer
    assert spec.source == "gguf" and spec.weights_exact and spec.extra["n_ctx_train"] == 8192


def test_gguf_bytes_are_the_tensor_table(hybrid: Path) -> None:
    header = read_gguf_header(hybrid)
    spec = read_gguf(hybrid)
    assert spec.weight_bytes == sum(t.nbytes for t in header.tensors)
    assert header.data_start + spec.weight_bytes <= hybrid.stat().st_size
    blk = [sum(t.nbytes for t in header.tensors if t.name.startswith(f"blk.{i}.")) for i in range(8)]
    assert spec.extra["layer_bytes"] == tuple(blk) and blk[3] > blk[0]  # attention layers weigh more here
    assert (
        spec.extra["tensor_count"] == len(header.tensors) and spec.extra["file_size"] == hybrid.stat().st_size
    )


def test_quant_on_a_file_is_refused(hybrid: Path) -> None:
    with pytest.raises(ConfigError, match=r"--quant awq applies to catalog ids and config\.json files only"):
        load_model(str(hybrid), quant="awq")


def _llama_kvs(arch: str = "llama", layers: int = 2, **extra: object) -> dict[str, object]:
    return {
        "general.architecture": arch,
        f"{arch}.block_count": layers,
        f"{arch}.embedding_length": 128,
        f"{arch}.context_length": 4096,
        f"{arch}.attention.head_count": 4,
        f"{arch}.attention.head_count_kv": 2,
        f"{arch}.feed_forward_length": 256,
        f"{arch}.vocab_size": 1000,
        **extra,
    }


def test_fork_types_moe_and_mtp_layers(tmp_path: Path) -> None:
    kvs = _llama_kvs(
        "glm4moe",
        3,
        **{
            "glm4moe.expert_count": 8,
            "glm4moe.expert_used_count": 2,
            "glm4moe.nextn_predict_layers": 1,
            "glm4moe.vocab_size": 256,
        },
    )
    tensors = [
        ("token_embd.weight", (128, 256), 143, 256 * 28),  # PTQ1_0: 28 B per 128 weights
        ("output.weight", (128, 256), 142, 256 * 34),  # PQ2_0: 34 B per 128
        ("blk.0.ffn_up_exps.weight", (128, 64, 8), 8, 128 * 64 * 8 // 32 * 34),
        ("blk.0.attn_q.weight", (128, 128), 0, 128 * 128 * 4),
        ("blk.1.attn_q.weight", (128, 128), 0, 128 * 128 * 4),
        ("blk.2.attn_q.weight", (128, 128), 0, 128 * 128 * 4),
    ]
    path = tmp_path / "moe.gguf"
    write_gguf(path, kvs, tensors)
    spec = read_gguf(path)
    assert spec.num_layers == 2 and spec.mtp_layers == 1 and spec.vocab_size == 256
    assert spec.weight_group("embedding").bytes == 7168 and spec.weight_group("embedding").dtype == "PTQ1_0"
    assert spec.weight_group("lm_head").bytes == 8704 and spec.weight_group("mtp").bytes == 65_536
    text = spec.weight_group("text")
    experts = 128 * 64 * 8
    assert text.params == experts + 2 * 128 * 128
    assert text.active_params == experts * 2 // 8 + 2 * 128 * 128
    assert text.active_bytes == text.bytes - round(experts // 32 * 34 * 6 / 8)


def test_per_layer_kv_arrays_and_sliding_period(tmp_path: Path) -> None:
    path = tmp_path / "gemma3.gguf"
    write_gguf(
        path,
        _llama_kvs(
            "gemma3",
            6,
            **{"gemma3.attention.sliding_window": 512, "gemma3.attention.head_count_kv": [2, 2, 1, 2, 2, 4]},
        ),
        [],
    )
    spec = read_gguf(path)
    assert spec.layer_kinds == (LayerKind.SLIDING_ATTENTION,) * 5 + (LayerKind.FULL_ATTENTION,)
    assert spec.kv_heads_per_layer == (2, 2, 1, 2, 2, 4) and spec.attention.sliding_window == 512


def test_mamba2_gguf(tmp_path: Path) -> None:
    path = tmp_path / "mamba2.gguf"
    kvs = {
        "general.architecture": "mamba2",
        "mamba2.block_count": 2,
        "mamba2.embedding_length": 64,
        "mamba2.context_length": 1024,
        "mamba2.ssm.inner_size": 128,
        "mamba2.ssm.state_size": 16,
        "mamba2.ssm.conv_kernel": 4,
        "mamba2.ssm.group_count": 1,
        "mamba2.ssm.time_step_rank": 8,
        "mamba2.vocab_size": 1000,
    }
    write_gguf(path, kvs, [])
    spec = read_gguf(path)
    assert spec.layer_kinds == (LayerKind.MAMBA,) * 2 and spec.kv_heads_per_layer == (0, 0)
    assert (spec.mamba.d_inner, spec.mamba.d_state, spec.mamba.n_heads, spec.mamba.conv_dim) == (
        128,
        16,
        8,
        160,
    )


def _header(n_tensors: int, n_kv: int) -> bytes:
    return b"GGUF" + struct.pack("<IQQ", 3, n_tensors, n_kv)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"GGML" + b"\0" * 40, "not a GGUF file"),
        (b"GGUF", "truncated"),
        (_header(10**15, 0), "declares 1000000000000000 tensors"),
        (_header(0, 10**15), "declares 1000000000000000 metadata entries"),
        (_header(0, 1) + struct.pack("<Q", 10**15), "bytes of metadata key"),
        (_header(0, 1) + gguf_string("k") + struct.pack("<IIQ", 9, 4, 10**15), "items of k"),
        (_header(0, 1) + gguf_string("k") + struct.pack("<I", 99), "unknown value type 99"),
        (_header(1, 0) + gguf_string("t") + struct.pack("<IQIQ", 1, 32, 200, 0), "unknown ggml type 200"),
        (_header(1, 0) + gguf_string("t") + struct.pack("<I", 9), "declares 9 dimensions"),
        (_header(1, 0) + gguf_string("t") + struct.pack("<IQIQ", 1, 10**12, 0, 0), "runs past the end"),
        (b"GGUF" + struct.pack("<I", 7) + b"\0" * 16, "version 7"),
    ],
)
def test_hostile_gguf(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "bad.gguf"
    path.write_bytes(content + b"\0" * 64 if message != "truncated" else content)
    with pytest.raises(ModelFormatError, match=message):
        read_gguf(path)


def test_truncated_real_file(hybrid: Path, tmp_path: Path) -> None:
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(hybrid.read_bytes()[: hybrid.stat().st_size // 2])
    with pytest.raises(ModelFormatError, match="truncated"):
        load_model(str(cut))


def test_hostile_block_count(tmp_path: Path) -> None:
    path = tmp_path / "huge.gguf"
    write_gguf(path, _llama_kvs("llama", 10**9), [])
    with pytest.raises(ModelFormatError, match=r"block_count 1000000000 .* out of range"):
        read_gguf(path)


def test_long_tokenizer_array_is_skipped_but_counted(tmp_path: Path) -> None:
    path = tmp_path / "vocab.gguf"
    kvs = {
        **{k: v for k, v in _llama_kvs().items() if not k.endswith(".vocab_size")},
        "tokenizer.ggml.tokens": [f"t{i}" for i in range(5000)],
        "general.name": "after-vocab",
    }
    write_gguf(path, kvs, [("token_embd.weight", (128, 5000), 0, 128 * 5000 * 4)])
    spec = read_gguf(path)
    assert spec.vocab_size == 5000 and spec.name == "after-vocab"  # keys after the skipped array still read
    assert spec.weight_group("embedding").bytes == 2_560_000

"""Hostile model files from valid seeds: GGUF headers, safetensors headers and config.json mutated at the level
of values, types, lengths and nesting. Driven by a `random.Random`, so the campaign in
benchmarks/fuzz_readers.py and the hypothesis suite in tests/unit/test_model_fuzz.py share one generator."""

from __future__ import annotations

import copy
import json
import random
import struct
from dataclasses import dataclass, field
from pathlib import Path

U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
_FMT = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f", BOOL: "<?"}
_FMT |= {U64: "<Q", I64: "<q", F64: "<d"}
_INT_RANGE = {U8: (0, 255), I8: (-128, 127), U16: (0, 65535), I16: (-32768, 32767)}
_INT_RANGE |= {
    U32: (0, 2**32 - 1),
    I32: (-(2**31), 2**31 - 1),
    U64: (0, 2**64 - 1),
    I64: (-(2**63), 2**63 - 1),
}

# keys the GGUF reader turns into numbers, with `{a}` for the architecture
GGUF_KEYS = [
    "{a}.block_count",
    "{a}.nextn_predict_layers",
    "{a}.embedding_length",
    "{a}.context_length",
    "{a}.feed_forward_length",
    "{a}.attention.head_count",
    "{a}.attention.head_count_kv",
    "{a}.attention.key_length",
    "{a}.attention.value_length",
    "{a}.attention.sliding_window",
    "{a}.attention.kv_lora_rank",
    "{a}.attention.q_lora_rank",
    "{a}.attention.key_length_mla",
    "{a}.attention.value_length_mla",
    "{a}.rope.dimension_count",
    "{a}.full_attention_interval",
    "{a}.ssm.state_size",
    "{a}.ssm.inner_size",
    "{a}.ssm.conv_kernel",
    "{a}.ssm.group_count",
    "{a}.ssm.time_step_rank",
    "{a}.expert_count",
    "{a}.expert_used_count",
    "{a}.expert_feed_forward_length",
    "{a}.expert_shared_count",
    "{a}.expert_shared_feed_forward_length",
    "{a}.leading_dense_block_count",
    "{a}.vocab_size",
    "general.alignment",
    "general.file_type",
    "general.architecture",
    "general.name",
    "tokenizer.ggml.tokens",
]
ARCHS = ["llama", "qwen35", "mamba", "mamba2", "gemma2", "gemma3", "deepseek2", "qwen3next", "", "é"]
HOSTILE_TEXT = ["", "-5", "١٢٨", "1e9", "nan", "128", "0x80", "\x00", "é" * 3, "9" * 5000]


@dataclass
class GGUFSeed:
    """A GGUF header as values: kvs are [key, type, value] (arrays: (item_type, items)); tensors
    [name, dims, type id, offset]; `data_bytes` is the data section's size."""

    version: int
    kvs: list[list[object]]
    tensors: list[list[object]]
    data_bytes: int
    alignment: int = 32
    arch: str = "llama"
    count_lies: dict[str, int] = field(default_factory=dict)


def parse_gguf(raw: bytes) -> GGUFSeed:
    """The structure of a valid GGUF file (only the files the campaign starts from)."""
    pos = 0

    def take(fmt: str) -> object:
        nonlocal pos
        (v,) = struct.unpack_from(fmt, raw, pos)
        pos += struct.calcsize(fmt)
        return v

    def text() -> bytes:
        nonlocal pos
        n = int(take("<Q"))  # type: ignore[call-overload]
        pos += n
        return raw[pos - n : pos]

    def value(t: int) -> object:
        if t in _FMT:
            return take(_FMT[t])
        if t == STRING:
            return text()
        item = int(take("<I"))  # type: ignore[call-overload]
        return (item, [value(item) for _ in range(int(take("<Q")))])  # type: ignore[call-overload]

    version, n_t, n_kv = struct.unpack_from("<IQQ", raw, 4)
    pos = 24
    kvs = []
    for _ in range(n_kv):
        key = text().decode()
        t = int(take("<I"))  # type: ignore[call-overload]
        kvs.append([key, t, value(t)])
    tensors = []
    for _ in range(n_t):
        name = text()
        dims = [take("<Q") for _ in range(int(take("<I")))]  # type: ignore[call-overload]
        tensors.append([name, dims, take("<I"), take("<Q")])
    start = -(-pos // 32) * 32
    arch = next((str(v, "utf-8") for k, _, v in kvs if k == "general.architecture"), "llama")  # type: ignore[call-overload]
    return GGUFSeed(version, kvs, tensors, len(raw) - start, arch=arch)


class RawBody(bytes):
    """A value body written verbatim (arrays nested too deep to build recursively)."""


def _pack_value(t: int, v: object) -> bytes:
    if isinstance(v, RawBody):
        return bytes(v)
    if t in _FMT:
        return struct.pack(_FMT[t], v)
    if t == STRING:
        raw = v if isinstance(v, bytes) else str(v).encode()
        return struct.pack("<Q", len(raw)) + raw
    item, items = v  # type: ignore[misc]
    return struct.pack("<IQ", item, len(items)) + b"".join(_pack_value(item, x) for x in items)


def pack_gguf(seed: GGUFSeed) -> bytes:
    lies = seed.count_lies
    head = b"GGUF" + struct.pack("<I", seed.version)
    head += struct.pack("<QQ", lies.get("tensors", len(seed.tensors)), lies.get("kvs", len(seed.kvs)))
    for key, t, v in seed.kvs:
        head += _pack_value(STRING, key) + struct.pack("<I", t) + _pack_value(t, v)  # type: ignore[arg-type]
    for name, dims, type_id, offset in seed.tensors:
        head += _pack_value(STRING, name) + struct.pack("<I", len(dims))  # type: ignore[arg-type]
        head += b"".join(struct.pack("<Q", d) for d in dims) + struct.pack("<IQ", type_id, offset)  # type: ignore[union-attr]
    return head + b"\0" * (-len(head) % seed.alignment)


def hostile_scalar(rng: random.Random, t: int) -> object:
    if t in _INT_RANGE:
        lo, hi = _INT_RANGE[t]
        return rng.choice([lo, hi, 0, 1, min(hi, 2**31), max(lo, -1), rng.randint(lo, hi), min(hi, 3)])
    if t in (F32, F64):
        return rng.choice([float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 0.5, 1e30, -128.0, 4096.0])
    if t == BOOL:
        return rng.random() < 0.5
    return rng.choice([*HOSTILE_TEXT, bytes([rng.randrange(256) for _ in range(rng.randrange(8))])])


def hostile_value(rng: random.Random, depth: int = 0) -> tuple[int, object]:
    """A (type, value) pair: boundary numbers, odd strings, short arrays, or arrays nested very deep."""
    t = rng.choice([U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64, ARRAY])
    if t != ARRAY:
        return t, hostile_scalar(rng, t)
    if depth == 0 and rng.random() < 0.15:  # nesting: a lone array inside an array inside ...
        depth = rng.choice([8, 100, 2000, 20000])
        return ARRAY, RawBody(struct.pack("<IQ", ARRAY, 1) * depth + struct.pack("<IQi", I32, 1, -1))
    item = rng.choice([U32, I32, I64, F32, STRING, U8] + ([ARRAY] if depth < 2 else []))
    n = rng.choice([0, 1, 2, 3, 8, 64, 300])
    if item == ARRAY:
        inner = [hostile_value(rng, depth + 1) for _ in range(n)]
        return ARRAY, (ARRAY, [v if tt == ARRAY else (I32, [0]) for tt, v in inner])
    return ARRAY, (item, [hostile_scalar(rng, item) for _ in range(n)])


def mutate_gguf(seed: GGUFSeed, rng: random.Random) -> bytes:
    """One to three structural mutations of `seed`, then (sometimes) a byte-level one."""
    s = copy.deepcopy(seed)
    for _ in range(rng.randint(1, 3)):
        rng.choice([_gguf_set_key, _gguf_set_key, _gguf_tensor, _gguf_count, _gguf_arch])(s, rng)
    raw = pack_gguf(s) + b"\0" * s.data_bytes
    return _byte_mutation(raw, rng, len(raw) - s.data_bytes) if rng.random() < 0.2 else raw


def _gguf_set_key(s: GGUFSeed, rng: random.Random) -> None:
    key = rng.choice(GGUF_KEYS).format(a=s.arch) if rng.random() < 0.8 else str(rng.choice(s.kvs)[0])
    t, v = hostile_value(rng)
    if key == "general.architecture" and rng.random() < 0.5:
        t, v = STRING, rng.choice(ARCHS).encode()
    for kv in s.kvs:
        if kv[0] == key:
            kv[1], kv[2] = t, v
            return
    s.kvs.append([key, t, v])


def _gguf_arch(s: GGUFSeed, rng: random.Random) -> None:
    new = rng.choice(ARCHS)
    for kv in s.kvs:
        key = str(kv[0])
        if key == "general.architecture":
            kv[1], kv[2] = STRING, new.encode()
        elif key.startswith(s.arch + "."):
            kv[0] = new + key[len(s.arch) :]
    s.arch = new


def _gguf_tensor(s: GGUFSeed, rng: random.Random) -> None:
    tensor = rng.choice(s.tensors)
    what = rng.randrange(6)
    if what == 0:
        tensor[1] = [
            rng.choice([0, 1, 3, 32, 2**32, 2**63, 2**64 - 1]) for _ in range(rng.choice([0, 1, 2, 5]))
        ]
    elif what == 1:
        tensor[2] = rng.choice([0, 1, 2, 8, 12, 30, 39, 142, 143, 1000, 2**32 - 1])
    elif what == 2:
        tensor[3] = rng.choice([0, 32, 2**63, 2**64 - 1, int(rng.choice(s.tensors)[3]), s.data_bytes])  # type: ignore[call-overload]
    elif what == 3:
        tensor[0] = rng.choice([b"blk.99999.x", b"blk.-1.attn_q.weight", b"", b"output.weight", b"\xff\xfe"])
    elif what == 4:
        s.tensors.append(list(tensor))  # a duplicate, same offset
    else:
        tensor[1] = [32, 2**40]


def _gguf_count(s: GGUFSeed, rng: random.Random) -> None:
    which = rng.choice(["tensors", "kvs"])
    real = len(s.tensors if which == "tensors" else s.kvs)
    s.count_lies[which] = rng.choice([0, real - 1, real + 1, 2**20, 2**63, 2**64 - 1])
    if rng.random() < 0.3:
        s.version = rng.choice([0, 1, 2, 4, 2**32 - 1])


def _byte_mutation(raw: bytes, rng: random.Random, header_end: int) -> bytes:
    what = rng.randrange(3)
    if what == 0:
        return raw[: rng.randrange(len(raw))]
    buf = bytearray(raw)
    if what == 1:
        for _ in range(rng.randint(1, 8)):
            buf[rng.randrange(header_end)] = rng.randrange(256)
    else:
        at = rng.randrange(max(1, header_end - 8))
        buf[at : at + 8] = struct.pack("<Q", rng.choice([0, 2**63, 2**64 - 1, 2**32, 4097]))
    return bytes(buf)


# ---- safetensors + config.json -----------------------------------------------------------------------------

SEED_CONFIG: dict[str, object] = {
    "model_type": "llama",
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 256,
    "max_position_embeddings": 2048,
    "torch_dtype": "bfloat16",
    "tie_word_embeddings": False,
}
CONFIG_KEYS = [
    *SEED_CONFIG,
    "head_dim",
    "sliding_window",
    "use_sliding_window",
    "sliding_window_pattern",
    "max_window_layers",
    "layer_types",
    "layers_block_type",
    "full_attention_interval",
    "attn_layer_period",
    "attn_layer_offset",
    "kv_lora_rank",
    "q_lora_rank",
    "qk_rope_head_dim",
    "qk_nope_head_dim",
    "v_head_dim",
    "num_experts",
    "num_local_experts",
    "n_routed_experts",
    "num_experts_per_tok",
    "moe_intermediate_size",
    "n_shared_experts",
    "shared_expert_intermediate_size",
    "first_k_dense_replace",
    "decoder_sparse_step",
    "mlp_only_layers",
    "linear_num_key_heads",
    "linear_num_value_heads",
    "linear_key_head_dim",
    "linear_value_head_dim",
    "linear_conv_kernel_dim",
    "state_size",
    "ssm_state_size",
    "mamba_d_state",
    "expand",
    "mamba_d_inner",
    "mamba_n_heads",
    "conv_kernel",
    "n_groups",
    "mtp_num_hidden_layers",
    "num_nextn_predict_layers",
    "quantization_config",
    "text_config",
    "vision_config",
    "_name_or_path",
    "dtype",
    "mamba_ssm_dtype",
    "hybrid_override_pattern",
]
_ST_DTYPES = {"BF16": 2, "F32": 4, "U8": 1}


def seed_tensors(config: dict[str, object]) -> dict[str, dict[str, object]]:
    """A safetensors header for SEED_CONFIG's shapes: embeddings, two layers, a head."""
    h, v, f = 64, 256, 128
    shapes = {"model.embed_tokens.weight": [v, h], "lm_head.weight": [v, h], "model.norm.weight": [h]}
    for i in range(2):
        for part, shape in {
            "self_attn.q_proj": [h, h],
            "self_attn.k_proj": [32, h],
            "mlp.up_proj": [f, h],
        }.items():
            shapes[f"model.layers.{i}.{part}.weight"] = shape
    table: dict[str, dict[str, object]] = {"__metadata__": {"format": "pt"}}  # type: ignore[dict-item]
    offset = 0
    for name, shape in shapes.items():
        size = 2 * shape[0] * (shape[1] if len(shape) > 1 else 1)
        table[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    return table


SEED_DATA_BYTES = 2 * (2 * 256 * 64 + 64 + 2 * (64 * 64 + 32 * 64 + 128 * 64))


def hostile_json(rng: random.Random) -> object:
    return rng.choice(
        [
            -128,
            -1,
            0,
            1,
            2**31,
            2**64,
            10**30,
            0.5,
            -0.0,
            1e308,
            True,
            False,
            None,
            "",
            "128",
            "١٢٨",
            "-5",
            "bfloat16",
            [],
            [1, 2],
            [-1],
            {},
            {"quant_method": "awq", "bits": -4},
            {"quant_method": 7},
            {"bits": "x", "quant_method": "gptq", "group_size": 0},
            ["full_attention"] * 3,
            ["bogus"],
            {"hidden_size": -1},
            "é" * 40,
            [[[[[]]]]],
        ]
    )


_MUTATIONS = {"config": [0, 1, 2, 3, 4, 8], "safetensors": [5, 6, 7, 9, 10], "both": list(range(11))}


def mutate_model_dir(rng: random.Random, target: str = "both") -> tuple[bytes, bytes]:
    """(config.json bytes, model.safetensors bytes) with one to three mutations of `target`: config,
    safetensors or both."""
    config, table = copy.deepcopy(SEED_CONFIG), seed_tensors(SEED_CONFIG)
    raw_config = raw_header = None
    lie = False
    for _ in range(rng.randint(1, 3)):
        what = rng.choice(_MUTATIONS[target])
        if what < 4:
            config[rng.choice(CONFIG_KEYS)] = hostile_json(rng)
        elif what == 4:
            config.pop(rng.choice(list(config)), None)
        elif what < 8:
            _mutate_entry(table, rng)
        elif what == 8:
            raw_config = _raw_json(rng, json.dumps(config))
        elif what == 9:
            raw_header = _raw_json(rng, json.dumps(table))
        else:
            lie = True
    header = raw_header if raw_header is not None else json.dumps(table).encode()
    length, data = len(header), SEED_DATA_BYTES
    if lie:
        length = rng.choice([0, 7, 2**63, 2**64 - 1, len(header) + 1, max(0, len(header) - 1), 200 * 2**20])
        data = rng.choice([data, data // 2, 0])
    safetensors = struct.pack("<Q", length) + header + b"\0" * data
    return (raw_config if raw_config is not None else json.dumps(config).encode()), safetensors


def _mutate_entry(table: dict[str, dict[str, object]], rng: random.Random) -> None:
    names = [n for n in table if n != "__metadata__" and isinstance(table[n], dict)]
    if not names:
        return
    entry = table[rng.choice(names)]
    what = rng.randrange(6)
    if what == 0:
        entry["dtype"] = rng.choice(["F64", "X9", "", 7, None, "bf16", "BOOL"])
    elif what == 1:
        entry["shape"] = rng.choice(
            [[-1, 64], [1.5], ["64"], [2**64], [], None, "64", [[64]], [True, 64], [0]]
        )
    elif what == 2:
        entry["data_offsets"] = rng.choice(
            [[-2, 0], [0, -1], [5, 3], [0], [0, 2**70], ["0", "8"], None, [0.0, 8]]
        )
    elif what == 3:
        other = table[rng.choice(names)]
        for part in ("data_offsets", "shape", "dtype"):
            entry[part] = copy.deepcopy(other.get(part))
    elif what == 4:
        table[rng.choice(["model.layers.99999.mlp.up_proj.weight", "model.layers.-1.x", "__metadata__"])] = (
            dict(entry)
        )
    else:
        table[rng.choice(names)] = rng.choice([None, [], "x", 5])  # type: ignore[assignment]


def _raw_json(rng: random.Random, text: str) -> bytes:
    return rng.choice(
        [
            b"[" * 100000 + b"]" * 100000,
            ('{"a":' * 50000 + "1" + "}" * 50000).encode(),
            text.replace("64", "9" * 5000, 1).encode(),
            text.replace("64", "NaN", 1).encode(),
            text.replace("64", "Infinity", 1).encode(),
            text.replace("64", "1e400", 1).encode(),
            b"\xef\xbb\xbf" + text.encode(),
            text.encode()[: rng.randrange(1, len(text))],
            b"\xff\xfe" + text.encode("utf-16-le"),
            b"",
            b"null",
            b'"string"',
        ]
    )


def write_model_dir(directory: Path, config: bytes, safetensors: bytes) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_bytes(config)
    (directory / "model.safetensors").write_bytes(safetensors)
    return directory

"""Byte-level writers for the model-file tests: GGUF and safetensors laid out by hand, so tests can build
valid files (including fork-only GGUF types the `gguf` package cannot write) and hostile ones."""

from __future__ import annotations

import json
import struct
from pathlib import Path

GGUF_STRING, GGUF_ARRAY, GGUF_U32, GGUF_U64, GGUF_F32 = 8, 9, 4, 10, 6


def gguf_string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack("<Q", len(raw)) + raw


def gguf_kv(key: str, value: object) -> bytes:
    """One metadata entry: str → string, int → u32, float → f32, list[int] → u32 array, list[str] → string array."""
    if isinstance(value, str):
        return gguf_string(key) + struct.pack("<I", GGUF_STRING) + gguf_string(value)
    if isinstance(value, list) and value and isinstance(value[0], str):
        body = struct.pack("<IQ", GGUF_STRING, len(value)) + b"".join(gguf_string(v) for v in value)
        return gguf_string(key) + struct.pack("<I", GGUF_ARRAY) + body
    if isinstance(value, list):
        body = struct.pack("<IQ", GGUF_U32, len(value)) + b"".join(struct.pack("<I", v) for v in value)
        return gguf_string(key) + struct.pack("<I", GGUF_ARRAY) + body
    if isinstance(value, float):
        return gguf_string(key) + struct.pack("<If", GGUF_F32, value)
    return gguf_string(key) + struct.pack("<II", GGUF_U32, value)


def write_gguf(
    path: Path, kvs: dict[str, object], tensors: list[tuple[str, tuple[int, ...], int, int]]
) -> int:
    """A GGUF v3 file; tensors are (name, ggml shape, type id, nbytes), data zero-filled. Returns the file size."""
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs))
    head += b"".join(gguf_kv(k, v) for k, v in kvs.items())
    offset = 0
    for name, shape, type_id, nbytes in tensors:
        head += (
            gguf_string(name) + struct.pack("<I", len(shape)) + b"".join(struct.pack("<Q", d) for d in shape)
        )
        head += struct.pack("<IQ", type_id, offset)
        offset += -(-nbytes // 32) * 32
    head += b"\0" * (-len(head) % 32)
    path.write_bytes(head + b"\0" * offset)
    return len(head) + offset


DTYPE_BYTES = {"BF16": 2, "F16": 2, "F32": 4, "I32": 4, "U8": 1, "F8_E4M3": 1}


def write_safetensors(path: Path, tensors: dict[str, tuple[str, tuple[int, ...]]]) -> int:
    """A safetensors file with zero data; tensors map name → (dtype, shape). Returns the data bytes."""
    header, offset = {}, 0
    for name, (dtype, shape) in tensors.items():
        size = DTYPE_BYTES[dtype]
        for dim in shape:
            size *= dim
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * offset)
    return offset

"""A safetensors file written directly: 8-byte little-endian header length, a JSON header, the raw bytes.

Format: https://github.com/huggingface/safetensors#format (docs/reference/vllm-cpu.md §2 names the files
a Hugging Face model directory holds). The header maps each tensor name to ``dtype``, ``shape`` and
``data_offsets`` (relative to the end of the header); it is padded with spaces to a multiple of 8 bytes,
as the safetensors library pads it. bf16 is the top half of float32, rounded to nearest even.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np

HEADER_ALIGN = 8


def bf16_bytes(values: np.ndarray) -> bytes:
    """float32 values as little-endian bfloat16 (round to nearest, ties to even; finite inputs only)."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype("<u2").tobytes()


def write_safetensors(path: Path, tensors: dict[str, np.ndarray], metadata: dict[str, str]) -> int:
    """Write float32 ``tensors`` as BF16, in name order; return the number of parameters written."""
    header: dict[str, object] = {"__metadata__": metadata}
    blobs, offset = [], 0
    for name in sorted(tensors):
        data = bf16_bytes(tensors[name])
        header[name] = {
            "dtype": "BF16",
            "shape": list(tensors[name].shape),
            "data_offsets": [offset, offset + len(data)],
        }
        blobs.append(data)
        offset += len(data)
    raw = json.dumps(header, separators=(",", ":")).encode("utf-8")
    raw += b" " * (-len(raw) % HEADER_ALIGN)
    with path.open("wb") as out:
        out.write(struct.pack("<Q", len(raw)))
        out.write(raw)
        for blob in blobs:
            out.write(blob)
    return sum(int(t.size) for t in tensors.values())

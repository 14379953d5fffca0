"""A bounds-checked reader of the GGUF header: metadata and the tensor table, never the tensor data.

Every length and count is checked against the bytes left in the file before it is used, so hostile files
(wrong magic, truncated, declared counts of 10^15) raise ModelFormatError without large allocations. Work is
bounded whatever the file size: at most MAX_HEADER_ITEMS entries, strings and tensors are visited, at most
MAX_KEPT_ITEMS array items kept, arrays nest at most MAX_ARRAY_DEPTH deep; tensors may not overlap.
gguf.GGUFReader is not used for this: it memory-maps first and raises arbitrary errors on hostile input, and it
rejects fork-only tensor types (PQ2_0 = 142, PTQ1_0 = 143) that servelab must still size. Value-type ids and
block sizes come from the `gguf` package (servelab.model.gguf_types).
"""

from __future__ import annotations

import math
import mmap
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from servelab.errors import ModelFormatError
from servelab.model.files import open_regular
from servelab.model.gguf_types import GGUFType, gguf_types

_SCALARS = {
    0: "<B",
    1: "<b",
    2: "<H",
    3: "<h",
    4: "<I",
    5: "<i",
    6: "<f",
    7: "<?",
    10: "<Q",
    11: "<q",
    12: "<d",
}
_STRING, _ARRAY = 8, 9
_KEPT_ARRAY_LEN = 4096  # longer arrays (tokenizer tables) are skipped; their length is kept
_MAX_DIMS = 4
MAX_HEADER_ITEMS = (
    1 << 22
)  # entries + strings + tensors visited: 4M (a 262k-token vocabulary + merges is ~1M)
MAX_KEPT_ITEMS = 1 << 16  # items of short arrays kept in memory, all arrays together
MAX_ARRAY_DEPTH = 3  # arrays of arrays of arrays; llama.cpp writes none deeper than 1
MAX_STRING_BYTES = 1 << 24  # one string (a chat template is ~10 KB)
MAX_TENSORS = 1 << 20
MAX_METADATA_ENTRIES = 1 << 16


@dataclass(frozen=True)
class SkippedArray:
    """A metadata array too long to keep (e.g. tokenizer.ggml.tokens): only its length."""

    length: int


@dataclass(frozen=True)
class GGUFTensorInfo:
    name: str
    shape: tuple[int, ...]  # ggml order: ne[0] is the row length
    type: GGUFType
    offset: int  # from the start of the data section
    nbytes: int

    @property
    def elements(self) -> int:
        return math.prod(self.shape)


@dataclass(frozen=True)
class GGUFHeader:
    version: int
    metadata: dict[str, object]
    tensors: tuple[GGUFTensorInfo, ...]
    data_start: int
    file_size: int


class _Cursor:
    """Reads a memory-mapped file front to back; every read is checked against the file size first."""

    def __init__(self, data: mmap.mmap | bytes) -> None:
        self.data, self.size, self.pos = data, len(data), 0
        self.items_left, self.kept_left = MAX_HEADER_ITEMS, MAX_KEPT_ITEMS

    def spend(self, n: int, what: str) -> None:
        """Count `n` more header items visited; a header past MAX_HEADER_ITEMS is refused."""
        self.items_left -= n
        if self.items_left < 0:
            raise ModelFormatError(
                f"GGUF header has more than {MAX_HEADER_ITEMS} entries, strings and tensors (at {what}); "
                "the file is hostile"
            )

    def keep(self, n: int, what: str) -> None:
        self.kept_left -= n
        if self.kept_left < 0:
            raise ModelFormatError(
                f"GGUF metadata keeps more than {MAX_KEPT_ITEMS} short-array items (at {what}); the file is hostile"
            )

    def take(self, n: int, what: str) -> bytes:
        self.need(n, what)
        self.pos += n
        return self.data[self.pos - n : self.pos]

    def need(self, n: int, what: str) -> None:
        if n < 0 or self.pos + n > self.size:
            raise ModelFormatError(
                f"GGUF {what} needs {n} bytes at offset {self.pos} but the file has {self.size}; "
                "the file is truncated or corrupt"
            )

    def unpack(self, fmt: str, what: str) -> int | float | bool:
        size = struct.calcsize(fmt)
        self.need(size, what)
        self.pos += size
        return struct.unpack_from(fmt, self.data, self.pos - size)[0]

    def count(self, what: str, min_item_bytes: int, limit: int = MAX_HEADER_ITEMS) -> int:
        n = int(self.unpack("<Q", what))
        if n > limit:
            raise ModelFormatError(f"GGUF declares {n} {what}; at most {limit} are read")
        if n * min_item_bytes > self.size - self.pos:
            raise ModelFormatError(
                f"GGUF declares {n} {what} but only {self.size - self.pos} bytes remain; "
                "the file is truncated or hostile"
            )
        return n

    def string(self, what: str) -> str:
        raw = self.take(self.count(f"bytes of {what}", 1, MAX_STRING_BYTES), what)
        return raw.decode("utf-8", errors="replace")

    def skip_strings(self, n: int, what: str) -> None:
        self.spend(n, what)
        for _ in range(n):
            length = self.count(f"bytes of {what}", 1, MAX_STRING_BYTES)  # advances past the length first
            self.pos += length


def read_gguf_header(path: Path) -> GGUFHeader:
    """Metadata and tensor table of a GGUF file, validated against its size (mapped, never read whole)."""
    try:
        with open_regular(path) as handle:
            if os.fstat(handle.fileno()).st_size < 24:
                return _read(_Cursor(handle.read()))
            with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
                return _read(_Cursor(data))
    except (OSError, ValueError) as exc:  # ValueError: mmap of a file truncated meanwhile
        raise ModelFormatError(f"cannot read {path}: {exc}") from exc


def _read(cur: _Cursor) -> GGUFHeader:
    if cur.take(4, "magic") != b"GGUF":
        raise ModelFormatError("not a GGUF file (the first 4 bytes are not 'GGUF')")
    version = int(cur.unpack("<I", "version"))
    if version not in (2, 3):
        raise ModelFormatError(f"GGUF version {version} is not supported (2 or 3)")
    n_tensors = cur.count("tensors", 8 + 4 + 8 + 4 + 8, MAX_TENSORS)
    n_kv = cur.count("metadata entries", 8 + 4 + 1, MAX_METADATA_ENTRIES)
    cur.spend(n_tensors + n_kv, "the entry counts")
    metadata = {}
    for _ in range(n_kv):
        key = cur.string("metadata key")
        if key in metadata:
            raise ModelFormatError(f"GGUF metadata key {key!r} appears twice; the file is corrupt")
        metadata[key] = _value(cur, int(cur.unpack("<I", f"type of {key}")), key, 0)
    types = {t.type_id: t for t in gguf_types().values()}
    infos = [_tensor_info(cur, types) for _ in range(n_tensors)]
    alignment = _alignment(metadata.get("general.alignment"))
    data_start = -(-cur.pos // alignment) * alignment
    tensors = tuple(_check_bounds(info, data_start, cur.size) for info in infos)
    _check_disjoint(tensors)
    return GGUFHeader(version, metadata, tensors, data_start, cur.size)


def _alignment(value: object) -> int:
    """``general.alignment`` (32 when absent or 0); a power of two or the file is refused (as llama.cpp does)."""
    if value is None or (type(value) is int and value == 0):
        return 32
    if type(value) is not int or value < 1 or value & (value - 1):  # GGUF writes it as a uint32
        raise ModelFormatError(f"GGUF general.alignment {value!r} is not a power of two")
    return value


def _value(cur: _Cursor, vtype: int, key: str, depth: int) -> object:
    if vtype in _SCALARS:
        return cur.unpack(_SCALARS[vtype], key)
    if vtype == _STRING:
        return cur.string(key)
    if vtype != _ARRAY:
        raise ModelFormatError(f"GGUF metadata {key!r} has unknown value type {vtype}")
    if depth >= MAX_ARRAY_DEPTH:
        raise ModelFormatError(f"GGUF metadata {key!r} nests arrays deeper than {MAX_ARRAY_DEPTH}")
    item_type = int(cur.unpack("<I", f"item type of {key}"))
    item_bytes = struct.calcsize(_SCALARS[item_type]) if item_type in _SCALARS else 8
    length = cur.count(f"items of {key}", item_bytes)
    if length <= _KEPT_ARRAY_LEN:
        cur.keep(length, key)
        return [_value(cur, item_type, key, depth + 1) for _ in range(length)]
    if item_type in _SCALARS:
        cur.take(length * item_bytes, key)
    elif item_type == _STRING:
        cur.skip_strings(length, key)
    else:
        raise ModelFormatError(
            f"GGUF metadata {key!r} is a long array of type {item_type}; only scalars and strings"
        )
    return SkippedArray(length)


def _tensor_info(cur: _Cursor, types: dict[int, GGUFType]) -> GGUFTensorInfo:
    name = cur.string("tensor name")
    n_dims = int(cur.unpack("<I", f"dims of {name}"))
    if not 1 <= n_dims <= _MAX_DIMS:
        raise ModelFormatError(f"GGUF tensor {name!r} declares {n_dims} dimensions (1 to {_MAX_DIMS})")
    shape = tuple(int(cur.unpack("<Q", f"shape of {name}")) for _ in range(n_dims))
    type_id = int(cur.unpack("<I", f"type of {name}"))
    qtype = types.get(type_id)
    if qtype is None:
        raise ModelFormatError(f"GGUF tensor {name!r} has unknown ggml type {type_id}")
    offset = int(cur.unpack("<Q", f"offset of {name}"))
    elements = math.prod(shape)
    if shape[0] % qtype.block_weights:
        raise ModelFormatError(f"GGUF tensor {name!r}: row of {shape[0]} is not whole {qtype.name} blocks")
    return GGUFTensorInfo(name, shape, qtype, offset, elements // qtype.block_weights * qtype.block_bytes)


def _check_bounds(info: GGUFTensorInfo, data_start: int, size: int) -> GGUFTensorInfo:
    if data_start + info.offset + info.nbytes > size:
        raise ModelFormatError(
            f"GGUF tensor {info.name!r} ({info.nbytes} bytes at data offset {info.offset}) runs "
            f"past the end of the {size}-byte file; the file is truncated"
        )
    return info


def _check_disjoint(tensors: tuple[GGUFTensorInfo, ...]) -> None:
    """No two tensors share a name or a byte of the data section."""
    names = set()
    end, previous = 0, None
    for info in sorted(tensors, key=lambda t: (t.offset, t.nbytes)):
        if info.name in names:
            raise ModelFormatError(f"GGUF tensor {info.name!r} appears twice; the file is corrupt")
        names.add(info.name)
        if previous is not None and info.offset < end:
            raise ModelFormatError(
                f"GGUF tensors {previous.name!r} and {info.name!r} overlap (data offset {info.offset} < {end}); "
                "the file is corrupt or hostile"
            )
        if info.nbytes:
            end, previous = info.offset + info.nbytes, info

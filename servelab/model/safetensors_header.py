"""Safetensors headers (never the weights) → exact bytes per component.

A safetensors file is an 8-byte little-endian header length, a JSON header mapping tensor names to
{dtype, shape, data_offsets} (offsets relative to the end of the header), then the data. Everything is
checked against the file size before use: a declared length past the file or over 100 MB, offsets outside
the data, or sizes that disagree with dtype × shape raise ModelFormatError.
"""

from __future__ import annotations

import json
import math
import os
import re
import struct
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from servelab.errors import ModelFormatError
from servelab.model.files import open_regular, read_regular
from servelab.model.hf_config import read_config, spec_from_config
from servelab.model.spec import ModelSpec, WeightGroup

MAX_HEADER_BYTES = 100 * 1024 * 1024  # the safetensors library's own limit
DTYPE_BYTES = {
    "F64": 8,
    "I64": 8,
    "U64": 8,
    "F32": 4,
    "I32": 4,
    "U32": 4,
    "F16": 2,
    "BF16": 2,
    "I16": 2,
    "U16": 2,
    "I8": 1,
    "U8": 1,
    "BOOL": 1,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
    "F8_E8M0": 1,
}
_VISION = re.compile(
    r"(^|\.)(visual|vision_tower|vision_model|multi_modal_projector|mm_projector|vision_embed)\."
)
_EMBED = re.compile(r"(^|\.)(embed_tokens|wte|tok_embeddings|word_embeddings)\.")
_LAYER = re.compile(r"(?:^|\.)layers\.([0-9]+)\.")  # ASCII digits: \d takes other scripts' digits


@dataclass(frozen=True)
class TensorEntry:
    name: str
    dtype: str
    shape: tuple[int, ...]
    nbytes: int


def header_length(prefix: bytes, file_size: int) -> int:
    """The declared header length from the first 8 bytes, checked against the file size."""
    if len(prefix) < 8:
        raise ModelFormatError(
            f"safetensors file too short ({len(prefix)} bytes); it needs an 8-byte header length"
        )
    (length,) = struct.unpack("<Q", prefix[:8])
    if length > MAX_HEADER_BYTES or 8 + length > file_size:
        raise ModelFormatError(
            f"safetensors header length {length} does not fit a {file_size}-byte file; "
            "the file is truncated or not safetensors"
        )
    return length


def parse_header(header: bytes, data_size: int) -> list[TensorEntry]:
    """Tensor entries from the JSON header; `data_size` is the file size minus 8 minus the header."""
    table = load_json(header, "safetensors header")
    if not isinstance(table, dict):
        raise ModelFormatError("safetensors header is not a JSON object; the file is corrupt")
    spans = [_entry(name, info, data_size) for name, info in table.items() if name != "__metadata__"]
    _check_disjoint(spans)
    return [entry for entry, _ in spans]


def load_json(raw: bytes, what: str) -> object:
    """JSON from bytes; anything json refuses (bad UTF-8, syntax, nesting, 4,300-digit numbers) is one line."""
    try:
        return json.loads(raw.decode("utf-8-sig"))
    except (ValueError, RecursionError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise ModelFormatError(f"{what} is not JSON ({str(exc)[:120]}); the file is corrupt") from None


def _ints(value: object, what: str) -> tuple[int, ...]:
    """A JSON list of non-negative integers (not bools, floats or strings)."""
    if not isinstance(value, list) or any(type(v) is not int or v < 0 for v in value):
        raise ModelFormatError(f"{what} is {str(value)[:60]}; a list of non-negative integers is expected")
    return tuple(value)


def _entry(name: str, info: Any, data_size: int) -> tuple[TensorEntry, tuple[int, int]]:
    if not isinstance(info, dict) or not isinstance(info.get("dtype"), str):
        raise ModelFormatError(f"safetensors tensor {name!r} has a malformed entry (no dtype string)")
    dtype = info["dtype"]
    shape = _ints(info.get("shape"), f"safetensors tensor {name!r} has a malformed entry: shape")
    offsets = _ints(
        info.get("data_offsets"), f"safetensors tensor {name!r} has a malformed entry: data_offsets"
    )
    if len(offsets) != 2:
        raise ModelFormatError(f"safetensors tensor {name!r} data_offsets must be [begin, end]")
    begin, end = offsets
    if dtype not in DTYPE_BYTES:
        raise ModelFormatError(
            f"safetensors tensor {name!r} has unknown dtype {dtype!r}; known: {', '.join(DTYPE_BYTES)}"
        )
    if any(d < 0 for d in shape) or not 0 <= begin <= end <= data_size:
        raise ModelFormatError(
            f"safetensors tensor {name!r} lies outside the file (offsets {begin}..{end}, "
            f"data {data_size} bytes)"
        )
    nbytes = math.prod(shape) * DTYPE_BYTES[dtype]
    if nbytes != end - begin:
        raise ModelFormatError(
            f"safetensors tensor {name!r}: {dtype}{list(shape)} needs {nbytes} bytes, "
            f"offsets give {end - begin}"
        )
    return TensorEntry(name, dtype, shape, nbytes), (begin, end)


def _check_disjoint(spans: list[tuple[TensorEntry, tuple[int, int]]]) -> None:
    """No two tensors share a byte of the data section (the safetensors library refuses them too)."""
    end, previous = 0, ""
    for entry, (begin, stop) in sorted(spans, key=lambda span: span[1]):
        if begin < end:
            raise ModelFormatError(
                f"safetensors tensors {previous!r} and {entry.name!r} overlap (offset {begin} < {end}); "
                "the file is corrupt or hostile"
            )
        if stop > begin:
            end, previous = stop, entry.name


def read_file_header(path: Path) -> list[TensorEntry]:
    """Read one local .safetensors file's header (only the header bytes are read)."""
    with open_regular(path) as handle:
        try:
            size = os.fstat(handle.fileno()).st_size
            length = header_length(handle.read(8), size)
            header = handle.read(length)
        except OSError as exc:
            raise ModelFormatError(f"cannot read {path}: {exc.strerror or exc}") from exc
    return parse_header(header, size - 8 - length)


MAX_SHARDS = 4096  # DeepSeek-V3 has 163 shards, the largest public checkpoints a few hundred


def shard_files(directory: Path) -> list[Path]:
    """The safetensors shards of a model directory (from model.safetensors.index.json when present)."""
    index = directory / "model.safetensors.index.json"
    if index.is_file():
        names = shard_names(read_regular(index, MAX_HEADER_BYTES, "weight index"))
        missing = [n for n in names if not (directory / n).is_file()]
        if missing:
            raise ModelFormatError(f"{index} lists {missing[0]} which is not in {directory}")
        return [directory / n for n in names]
    found = sorted(directory.glob("*.safetensors"))
    if len(found) > MAX_SHARDS:
        raise ModelFormatError(
            f"{directory} holds {len(found)} .safetensors files, more than any real model ({MAX_SHARDS}); "
            "point at the model's own directory"
        )
    return found


def shard_names(raw: bytes) -> list[str]:
    """The distinct shard files a model.safetensors.index.json names, at most MAX_SHARDS of them (each
    costs a header read, two requests with --hf)."""
    names = sorted(set(index_weight_map(raw).values()))
    if len(names) > MAX_SHARDS:
        raise ModelFormatError(
            f"model.safetensors.index.json names {len(names)} shard files, more than any real model "
            f"({MAX_SHARDS}); it is not a model index"
        )
    return names


def index_weight_map(raw: bytes) -> dict[str, str]:
    index = load_json(raw, "model.safetensors.index.json")
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict) or any(
        not isinstance(v, str) or "/" in v or "\\" in v for v in weight_map.values()
    ):
        raise ModelFormatError(
            "model.safetensors.index.json weight_map must map tensor names to shard file names"
        )
    return weight_map


def component_of(name: str, num_layers: int) -> str:
    """Which WeightGroup a tensor belongs to, by its name."""
    if _VISION.search(name):
        return "vision"
    if name.startswith("mtp.") or ".mtp." in name:
        return "mtp"
    layer = _LAYER.search(name)
    if (
        layer and len(layer.group(1)) <= 9 and int(layer.group(1)) >= num_layers
    ):  # DeepSeek nextn layers follow the decoder layers
        return "mtp"
    if _EMBED.search(name):
        return "embedding"
    if name.startswith("lm_head") or ".lm_head." in name:
        return "lm_head"
    return "text"


def apply_headers(spec: ModelSpec, entries: list[TensorEntry]) -> ModelSpec:
    """Replace counted bytes with the exact bytes of each component's tensors (params stay architectural)."""
    exact: dict[str, int] = {}
    experts = 0
    for entry in entries:
        group = component_of(entry.name, spec.num_layers)
        exact[group] = exact.get(group, 0) + entry.nbytes
        if group == "text" and ".experts." in entry.name:
            experts += entry.nbytes
    counted = {w.name: w for w in spec.weights}
    groups = tuple(
        _exact_group(spec, counted.get(name), name, nbytes, experts) for name, nbytes in exact.items()
    )
    return replace(spec, weights=groups, weights_exact=True)


def _exact_group(
    spec: ModelSpec, counted: WeightGroup | None, name: str, nbytes: int, experts: int
) -> WeightGroup:
    params = counted.params if counted else 0
    dtype = counted.dtype if counted else spec.quant
    active = counted.active_params if counted else None
    active_bytes = None
    if name == "text" and spec.moe is not None and experts:
        active_bytes = nbytes - round(experts * (1 - spec.moe.experts_per_token / spec.moe.num_experts))
    return WeightGroup(name, params, nbytes, dtype, active, active_bytes)


def read_model_dir(path: Path) -> ModelSpec:
    """A model directory or config.json: architecture from the config, exact bytes from safetensors headers."""
    directory = path if path.is_dir() else path.parent
    config = read_config(path)
    name = str(config.get("_name_or_path") or directory.name)
    spec = spec_from_config(config, name=name, source="hf")
    entries = [entry for shard in shard_files(directory) for entry in read_file_header(shard)]
    return apply_headers(spec, entries) if entries else spec

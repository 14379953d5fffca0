"""Storage sizes of cache dtypes: bytes for a row of n elements, block-quantised types included.

Names are canonical (`bf16`, `fp16`, `fp32`, `fp8_e5m2`, `fp8_e4m3`, llama.cpp `q8_0`, `q4_0`, ...); `canonical_dtype`
maps the spellings engines and configs use (`f16`, `float16`, `bfloat16`, `fp8`, `float32`) onto them.
Block types: llama.cpp ggml-common.h (q8_0 = 32 weights in 34 bytes, q4_0 = 32 in 18, ...).
"""

from __future__ import annotations

from servelab.errors import ConfigError

# canonical name -> (elements per block, bytes per block)
_BLOCKS: dict[str, tuple[int, int]] = {
    "fp32": (1, 4),
    "bf16": (1, 2),
    "fp16": (1, 2),
    "fp8_e5m2": (1, 1),
    "fp8_e4m3": (1, 1),
    "q8_0": (32, 34),
    "q5_1": (32, 24),
    "q5_0": (32, 22),
    "q4_1": (32, 20),
    "q4_0": (32, 18),
    "iq4_nl": (32, 18),
}

_ALIASES = {
    "f32": "fp32",
    "float32": "fp32",
    "float": "fp32",
    "f16": "fp16",
    "float16": "fp16",
    "half": "fp16",
    "bfloat16": "bf16",
    "fp8": "fp8_e4m3",  # vLLM's `fp8` means e4m3
    "fp8_e4m3fn": "fp8_e4m3",
}


def canonical_dtype(name: str) -> str:
    """The canonical spelling of a cache dtype; ConfigError naming the choices when unknown."""
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    if key not in _BLOCKS:
        raise ConfigError(f"unknown cache dtype {name!r}; choose one of: {', '.join(_BLOCKS)}")
    return key


def row_bytes(dtype: str, n_elements: int) -> int:
    """Bytes for `n_elements` values stored as `dtype` (ggml_row_size for block types)."""
    block_elems, block_bytes = _BLOCKS[canonical_dtype(dtype)]
    if n_elements % block_elems:
        raise ConfigError(
            f"a row of {n_elements} values cannot be stored as {dtype} (blocks of {block_elems})"
        )
    return n_elements // block_elems * block_bytes


def bytes_per_element(dtype: str) -> float:
    block_elems, block_bytes = _BLOCKS[canonical_dtype(dtype)]
    return block_bytes / block_elems

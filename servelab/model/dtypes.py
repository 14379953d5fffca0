"""Dtype names, one spelling each, with the conversion in each direction explicit; and their storage sizes.

Canonical names: ``fp32``, ``bf16``, ``fp16``, ``fp8_e5m2``, ``fp8_e4m3`` and llama.cpp's block types ``q8_0``,
``q5_1``, ``q5_0``, ``q4_1``, ``q4_0``, ``iq4_nl``. The directions:
- any spelling (CLI, HF config ``torch_dtype``, an engine's flag) → canonical: ``canonical_dtype`` (ConfigError
  when unknown) or ``find_dtype`` (None when unknown); ``same_dtype`` compares two spellings.
- canonical → an engine's own spelling: ``engine_spelling`` with the engine's table (data in its package:
  engine spelling → canonical, ``auto`` for "the model's own dtype").
- an engine's spelling → what the cache is stored in: ``storage_dtype`` (``auto`` is the model's dtype).
Block types: llama.cpp ggml-common.h (q8_0 = 32 weights in 34 bytes, q4_0 = 32 in 18, ...).
"""

from __future__ import annotations

from collections.abc import Mapping

from servelab.errors import ConfigError

AUTO = "auto"  # an engine's "whatever the model's own dtype is"

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
    "fp8": "fp8_e4m3",  # vLLM's and sglang's `fp8` means e4m3
    "fp8_e4m3fn": "fp8_e4m3",
    "float8_e4m3fn": "fp8_e4m3",  # torch
    "float8_e5m2": "fp8_e5m2",
}


def find_dtype(name: str) -> str | None:
    """The canonical spelling of ``name`` (case and a ``torch.`` prefix ignored), or None when unknown."""
    key = name.strip().lower().removeprefix("torch.")
    key = _ALIASES.get(key, key)
    return key if key in _BLOCKS else None


def canonical_dtype(name: str) -> str:
    """The canonical spelling of a dtype; ConfigError naming the choices when unknown."""
    found = find_dtype(name)
    if found is None:
        raise ConfigError(f"unknown cache dtype {name!r}; choose one of: {', '.join(_BLOCKS)}")
    return found


def same_dtype(a: str, b: str) -> bool:
    """True when two spellings name one dtype (unknown names compare as lower-case text)."""
    return (find_dtype(a) or a.strip().lower()) == (find_dtype(b) or b.strip().lower())


def engine_spelling(requested: str, spellings: Mapping[str, str]) -> str | None:
    """The engine's own spelling for ``requested`` (any spelling, or ``auto``); None when the engine has none.

    ``spellings`` maps each engine spelling to its canonical name (``auto`` to ``auto``); a spelling the
    engine already uses is kept, otherwise the first one for the same canonical dtype is chosen.
    """
    key = requested.strip().lower()
    if key in spellings:
        return key
    wanted = AUTO if key == AUTO else find_dtype(key)
    return next((spelling for spelling, canonical in spellings.items() if canonical == wanted), None)


def storage_dtype(engine_value: str, model_dtype: str) -> str:
    """The dtype an engine's cache is stored in: ``auto`` is the model's own dtype, anything else canonical."""
    return model_dtype if engine_value.strip().lower() == AUTO else canonical_dtype(engine_value)


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

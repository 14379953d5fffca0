"""servelab.model.dtypes: the one table of dtype names, each direction a function, and the storage sizes."""

from __future__ import annotations

import pytest

from servelab.engines.llamacpp.memory import CACHE_TYPES
from servelab.engines.llamacpp.memory import engine_kv_dtype as llamacpp_kv
from servelab.engines.sglang.memory import KV_DTYPES as SGLANG_KV
from servelab.engines.sglang.memory import engine_kv_dtype as sglang_kv
from servelab.engines.vllm.memory import KV_DTYPES as VLLM_KV
from servelab.engines.vllm.memory import engine_kv_dtype as vllm_kv
from servelab.errors import ConfigError
from servelab.model.dtypes import (
    AUTO,
    bytes_per_element,
    canonical_dtype,
    engine_spelling,
    find_dtype,
    row_bytes,
    same_dtype,
    storage_dtype,
)


@pytest.mark.parametrize(
    ("spelling", "canonical"),
    [
        ("f32", "fp32"),
        ("float32", "fp32"),
        ("float", "fp32"),
        ("F16", "fp16"),
        ("float16", "fp16"),
        ("half", "fp16"),
        ("bfloat16", "bf16"),
        ("torch.bfloat16", "bf16"),
        (" BF16 ", "bf16"),
        ("fp8", "fp8_e4m3"),
        ("fp8_e4m3fn", "fp8_e4m3"),
        ("float8_e5m2", "fp8_e5m2"),
        ("Q8_0", "q8_0"),
        ("iq4_nl", "iq4_nl"),
    ],
)
def test_every_spelling_has_one_canonical_name(spelling: str, canonical: str) -> None:
    assert canonical_dtype(spelling) == find_dtype(spelling) == canonical


def test_unknown_names() -> None:
    assert find_dtype("int8") is None and find_dtype(AUTO) is None
    with pytest.raises(ConfigError, match="unknown cache dtype 'int8'; choose one of: fp32, bf16"):
        canonical_dtype("int8")


def test_same_dtype_compares_spellings_and_falls_back_to_text() -> None:
    assert same_dtype("f16", "float16") and same_dtype("fp8", "fp8_e4m3") and same_dtype("AUTO", "auto")
    assert (
        not same_dtype("fp8_e5m2", "fp8") and not same_dtype("bf16", "fp16") and same_dtype("Weird", "weird")
    )


def test_engine_tables_name_only_canonical_dtypes() -> None:
    for table in (CACHE_TYPES, SGLANG_KV, VLLM_KV):
        assert all(canonical == AUTO or find_dtype(canonical) == canonical for canonical in table.values())
        assert all(engine_spelling(spelling, table) == spelling for spelling in table)  # own spellings kept


def test_engine_spelling_picks_the_engines_first_spelling_for_the_dtype() -> None:
    assert engine_spelling("bf16", VLLM_KV) == "bfloat16"
    assert engine_spelling("fp8_e4m3fn", VLLM_KV) == "fp8"  # vLLM's first spelling of e4m3
    assert engine_spelling("fp16", CACHE_TYPES) == "f16" and engine_spelling("float32", CACHE_TYPES) == "f32"
    assert engine_spelling("q8_0", SGLANG_KV) is None and engine_spelling(AUTO, CACHE_TYPES) is None


def test_storage_dtype_resolves_auto_to_the_models_dtype() -> None:
    assert storage_dtype("auto", "bf16") == "bf16"
    assert storage_dtype("bfloat16", "fp16") == "bf16" and storage_dtype("fp8", "bf16") == "fp8_e4m3"
    assert storage_dtype("f16", "bf16") == "fp16"


# requested -> (llama.cpp, sglang, vLLM), as the engines' memory modules answered before the one table
ENGINE_KV = {
    None: ("f16", "auto", "auto"),
    "auto": ("f16", "auto", "auto"),
    "f16": ("f16", "fp16", "auto"),
    "FP16": ("f16", "fp16", "auto"),
    "float16": ("f16", "fp16", "auto"),
    "bfloat16": ("bf16", "bf16", "bfloat16"),
    "fp32": ("f32", None, None),
    "fp8": ("q8_0", "fp8_e4m3", "fp8"),
    "fp8_e4m3": ("q8_0", "fp8_e4m3", "fp8_e4m3"),
    "fp8_e5m2": ("q8_0", "fp8_e5m2", "fp8_e5m2"),
    "q8_0": ("q8_0", "fp8_e4m3", "fp8"),
    "iq4_nl": ("iq4_nl", "fp8_e4m3", "fp8"),
}


@pytest.mark.parametrize("requested", list(ENGINE_KV))
def test_each_engines_kv_dtype_for_a_request(requested: str | None) -> None:
    for engine_kv, expected in zip((llamacpp_kv, sglang_kv, vllm_kv), ENGINE_KV[requested], strict=True):
        if expected is None:
            with pytest.raises(ConfigError, match="is not supported"):
                engine_kv(requested)
        else:
            assert engine_kv(requested)[0] == expected


def test_sizes() -> None:
    assert row_bytes("q8_0", 128) == 136 and row_bytes("f16", 128) == 256 and row_bytes("fp8", 128) == 128
    assert bytes_per_element("q4_0") == 18 / 32 and bytes_per_element("float32") == 4
    with pytest.raises(ConfigError, match="a row of 100 values cannot be stored as q8_0"):
        row_bytes("q8_0", 100)

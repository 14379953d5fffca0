"""The corpus loader: whole rows load typed; a row missing what the schema asks is refused by name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servelab.errors import ModelFormatError
from servelab.predict.corpus import gpu_classes, load_file


def _row(**overrides: object) -> dict:
    row = {
        "engine": "llama.cpp",
        "engine_release": "b6100",
        "backend": "cuda",
        "model": "llama 7B Q4_0",
        "model_kind": "dense",
        "params_b": 6.74,
        "active_params_b": 6.74,
        "weight_format": "Q4_0",
        "kv_dtype": "f16",
        "gpu": "rtx4090",
        "gpu_label": "NVIDIA GeForce RTX 4090",
        "gpu_count": 1,
        "flags": {"flash_attn": True, "n_ubatch": 512},
        "workload": {"prompt_tokens": 512, "output_tokens": 0, "concurrency": 1, "dataset": "llama-bench"},
        "figures": {"pp_tok_s": 14000.5},
        "verbatim": ["| llama 7B Q4_0 | 3.56 GiB | 6.74 B | CUDA | 99 | 1 | pp512 | 14000.50 ± 10.00 |"],
    }
    row.update(overrides)
    return row


def _write(tmp_path: Path, rows: list[dict], **source: object) -> Path:
    doc = {
        "source": {
            "url": "https://github.com/ggml-org/llama.cpp/discussions/15013",
            "title": "Performance of llama.cpp on NVIDIA CUDA",
            "published": "2025-08-02",
            "client": "llama-bench",
            **source,
        },
        "rows": rows,
    }
    path = tmp_path / "example-source.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def test_a_whole_row_loads_typed_with_its_source(tmp_path: Path) -> None:
    (row,) = load_file(_write(tmp_path, [_row()]))
    assert row.source.id == "example-source"
    assert row.label == "example-source#0"
    assert row.figures == {"pp_tok_s": 14000.5}
    assert row.workload.prompt_tokens == 512 and row.workload.depth == 0
    assert row.tp == 1 and row.flags["n_ubatch"] == 512
    assert not row.excluded


@pytest.mark.parametrize(
    ("overrides", "said"),
    [
        ({"gpu": "rtx9999"}, "not a catalog name"),
        ({"figures": {}}, "at least one figure"),
        ({"figures": {"tok_s": 3.0}}, "unknown figure 'tok_s'"),
        ({"figures": {"tg_tok_s": -1}}, "tg_tok_s must be a positive number"),
        ({"verbatim": []}, "'verbatim' must list"),
        ({"engine": "tgi"}, "'engine' is 'tgi'"),
        ({"gpu_count": 0}, "'gpu_count' must be a whole number >= 1"),
        ({"flags": {"x": [1]}}, "'flags' must map"),
        ({"params_b": "7"}, "'params_b' must be a positive number"),
    ],
)
def test_a_row_missing_what_the_schema_asks_is_refused_by_name(
    tmp_path: Path, overrides: dict, said: str
) -> None:
    with pytest.raises(ModelFormatError, match="row 0") as caught:
        load_file(_write(tmp_path, [_row(**overrides)]))
    assert said in str(caught.value)


@pytest.mark.parametrize(
    ("source", "said"),
    [
        ({"url": "http://example.com"}, "https://"),
        ({"published": "Aug 2025"}, "YYYY-MM-DD"),
        ({"client": "ab"}, "'client'"),
    ],
)
def test_a_source_without_its_address_date_or_client_is_refused(
    tmp_path: Path, source: dict, said: str
) -> None:
    with pytest.raises(ModelFormatError, match=r"example-source\.json") as caught:
        load_file(_write(tmp_path, [_row()], **source))
    assert said in str(caught.value)


def test_every_catalog_gpu_has_a_class() -> None:
    classes = gpu_classes()
    assert classes["h100-sxm"] == "hbm" and classes["rtx4090"] == "gddr"
    assert classes["m4-max"] == "apple" and classes["mi300x"] == "amd"
    assert set(classes.values()) == {"gddr", "hbm", "apple", "amd"}

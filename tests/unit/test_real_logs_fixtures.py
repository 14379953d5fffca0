"""The validation set of real engine logs (tests/fixtures/real-logs/, issue 16): every case is well formed.

Each case is a YAML file of verbatim startup-log lines a real engine printed in a public thread. This test
checks the case format of tests/fixtures/real-logs/README.md: the keys, a source a reader can open, the engine
matching its folder, a model the planner can build (catalog id or an attached config.json that parses), and
that every figure in `expected` is a number the quoted log really shows (digits compared with or without
thousands separators), so no figure can be typed in by hand.
"""

from __future__ import annotations

import datetime
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from servelab.model.catalog import find_catalog_id

ROOT = Path(__file__).resolve().parents[1] / "fixtures" / "real-logs"
ENGINES = ("vllm", "sglang", "llamacpp")
TAGS = {"moe", "tp", "hybrid", "mla", "swa"}
REQUIRED = (
    "source",
    "retrieved",
    "engine",
    "engine_version",
    "model",
    "quantization",
    "gpu",
    "gpu_count",
    "tags",
    "command",
    "settings",
    "started",
    "log",
    "expected",
)
# A number in a log line: optional sign, digits with optional thousands separators, optional decimals.
NUMBER = re.compile(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?|-?\d+(?:\.\d+)?")


def case_paths() -> list[Path]:
    return sorted(path for engine in ENGINES for path in (ROOT / engine).glob("*.yaml"))


def load_case(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict), f"{path.name}: a case is a mapping"
    return data


def log_numbers(text: str) -> set[float]:
    return {float(token.replace(",", "")) for token in NUMBER.findall(text)}


def appears_in(value: float, numbers: set[float]) -> bool:
    return any(abs(value - number) <= 1e-9 * max(1.0, abs(number)) for number in numbers)


def test_the_set_is_there() -> None:
    paths = case_paths()
    assert len([p for p in paths if p.parent.name == "vllm"]) >= 12


@pytest.mark.parametrize("path", case_paths(), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_case_has_every_key_and_a_real_source(path: Path) -> None:
    case = load_case(path)
    missing = [key for key in REQUIRED if key not in case]
    assert not missing, f"{path.name}: missing {missing}"
    assert re.fullmatch(r"https://\S+", str(case["source"])), "source must be an https URL"
    assert isinstance(case["retrieved"], datetime.date)
    assert case["engine"] == path.parent.name
    assert str(case["engine_version"]).strip()
    assert isinstance(case["gpu_count"], int) and case["gpu_count"] >= 1
    assert isinstance(case["started"], bool)
    assert isinstance(case["log"], str) and case["log"].strip()
    assert isinstance(case["settings"], dict) and isinstance(case["expected"], dict) and case["expected"]


@pytest.mark.parametrize("path", case_paths(), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_tags_and_parallelism_agree(path: Path) -> None:
    case = load_case(path)
    tags = set(case["tags"] or [])
    assert tags <= TAGS, f"unknown tags {tags - TAGS}"
    tensor_parallel = case["settings"].get("tensor_parallel")
    if tensor_parallel is not None:
        assert ("tp" in tags) == (int(tensor_parallel) > 1)
        assert case["gpu_count"] >= int(tensor_parallel)
    if case["engine"] == "vllm":
        assert case.get("vllm_engine") in ("V1", "V0")


@pytest.mark.parametrize("path", case_paths(), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_a_refusal_is_quoted_from_the_log(path: Path) -> None:
    case = load_case(path)
    refusal = case.get("refusal")
    if case["started"]:
        assert not refusal, "a case that started has no refusal"
    else:
        assert isinstance(refusal, str) and refusal.strip(), "a refused start quotes the engine's error"
        assert refusal.strip() in case["log"], "the refusal is a verbatim part of the log"


@pytest.mark.parametrize("path", case_paths(), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_expected_figure_is_in_the_log(path: Path) -> None:
    case = load_case(path)
    numbers = log_numbers(case["log"])
    derived = case.get("derived") or {}
    assert set(derived) <= set(case["expected"]), "derived names figures of `expected`"
    for name, value in case["expected"].items():
        assert isinstance(value, int | float) and not isinstance(value, bool), f"{name} is a number"
        if name not in derived:
            assert appears_in(float(value), numbers), f"{name}={value} is not a number of the quoted log"
    for name, tolerance in (case.get("tolerance") or {}).items():
        assert name in case["expected"] and 0 < float(tolerance) < 1


@pytest.mark.parametrize("path", case_paths(), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_the_model_can_be_built(path: Path) -> None:
    case = load_case(path)
    config_name = case.get("model_config")
    if config_name:
        config_path = path.parent / str(config_name)
        assert config_path.is_file(), f"{config_name} is missing"
        assert isinstance(json.loads(config_path.read_text(encoding="utf-8")), dict)
        assert re.fullmatch(r"https://\S+", str(case.get("model_config_source"))), "say where it came from"
        return
    in_catalog = find_catalog_id(str(case["model"])) or find_catalog_id(str(case.get("catalog_model", "")))
    gguf_metadata = case["engine"] == "llamacpp" and "general.architecture" in case["log"]
    assert in_catalog or gguf_metadata, "no config attached and the model is not in the catalog"


def test_the_figure_reader_accepts_separators_and_rejects_other_digits() -> None:
    numbers = log_numbers("GPU KV cache size: 395,104 tokens\nAvailable KV cache memory: -2.14 GiB")
    assert appears_in(395104, numbers) and appears_in(-2.14, numbers)
    assert not appears_in(395105, numbers) and not appears_in(2.14, numbers)

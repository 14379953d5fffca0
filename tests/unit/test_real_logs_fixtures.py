"""The validation set of real engine logs (tests/fixtures/real-logs/, issue 16): every case is well formed.

Each case is a YAML file of verbatim startup-log lines a real engine printed in a public thread. This test
checks the case format of tests/fixtures/real-logs/README.md: the keys, a source a reader can open, the engine
matching its folder, a model the planner can build (catalog id, `catalog_model`, or an attached config.json
that parses; or `plannable: false` with its reason), a GPU the catalog knows (`gpu_catalog`), and that every
figure in `expected` is a number the quoted log really shows (digits compared with or without thousands
separators; a per-device figure is a mapping {device: number}, each number in the log; a `derived` figure is
the sum of the addends it lists, each in the log), so no figure can be typed in by hand.
"""

from __future__ import annotations

import datetime
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from servelab.hardware.gpus import find_gpu
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
README = ROOT / "README.md"
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


def figure_values(value: object) -> list[float]:
    """The numbers of one `expected` figure: a number, or a mapping {device: number} (llama.cpp buffers)."""
    values = list(value.values()) if isinstance(value, dict) else [value]
    for item in values:
        assert isinstance(item, int | float) and not isinstance(item, bool), f"{value!r} is not a number"
    return [float(item) for item in values]


def test_the_set_is_there() -> None:
    paths = case_paths()
    assert len([p for p in paths if p.parent.name == "vllm"]) >= 12


def test_the_readme_lists_every_case_and_its_counts() -> None:
    text = README.read_text(encoding="utf-8")
    listed = set(re.findall(r"^\| `?([a-z0-9][a-z0-9._-]+)`? \|", text, flags=re.MULTILINE))
    paths = case_paths()
    assert {p.stem for p in paths} <= listed, f"README lacks {sorted({p.stem for p in paths} - listed)}"
    for engine in (*ENGINES, "all"):
        row = counts_row(engine, [load_case(p) for p in paths if engine in ("all", p.parent.name)])
        assert row in text, f"README's counts row should read {row}"


def counts_row(engine: str, cases: list[dict[str, Any]]) -> str:
    """The README's counts row: cases, plannable, started / refused / not shown, then each tag."""
    counts = [
        len(cases),
        sum(case.get("plannable", True) is not False for case in cases),
        *(sum(case["started"] is state for case in cases) for state in (True, False, None)),
        *(
            sum(tag in (case["tags"] or []) for case in cases)
            for tag in ("hybrid", "moe", "tp", "swa", "mla")
        ),
    ]
    return "| " + " | ".join([engine, *map(str, counts)]) + " |"


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
    assert case["started"] in (True, False, None), (
        "started: true, false, or null when the excerpt does not show it"
    )
    if case["started"] is None:
        assert "no fit signal" in str(case.get("notes")), "started: null says in notes why (no fit signal)"
    assert case.get("plannable", True) in (True, False)
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
    if case["started"] is not False:
        assert not refusal, "a case that started (or may have) has no refusal"
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
        values = figure_values(value)
        if name in derived:
            addends = derived[name]
            assert isinstance(addends, list) and len(addends) >= 2, f"derived {name} lists its addends"
            for addend in addends:
                assert appears_in(float(addend), numbers), f"{name}: addend {addend} is not in the log"
            assert len(values) == 1 and abs(sum(addends) - values[0]) <= 1e-6 * max(1.0, abs(values[0]))
        else:
            for item in values:
                assert appears_in(item, numbers), f"{name}={item} is not a number of the quoted log"
    for name, tolerance in (case.get("tolerance") or {}).items():
        assert name in case["expected"] and 0 < float(tolerance) < 1


@pytest.mark.parametrize("path", case_paths(), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_the_model_can_be_built(path: Path) -> None:
    case = load_case(path)
    if case.get("catalog_model") is not None:
        assert find_catalog_id(str(case["catalog_model"])), (
            f"catalog_model {case['catalog_model']} is unknown"
        )
    if case.get("plannable", True) is False:
        reason = case.get("plannable_reason")
        assert isinstance(reason, str) and reason.strip(), "plannable: false says why in plannable_reason"
        return
    config_name = case.get("model_config")
    if config_name:
        config_path = path.parent / str(config_name)
        assert config_path.is_file(), f"{config_name} is missing"
        assert isinstance(json.loads(config_path.read_text(encoding="utf-8")), dict)
        assert re.fullmatch(r"https://\S+", str(case.get("model_config_source"))), "say where it came from"
        return
    in_catalog = find_catalog_id(str(case["model"])) or find_catalog_id(str(case.get("catalog_model") or "-"))
    assert in_catalog, "no config attached, the model is not in the catalog, and no catalog_model is named"


@pytest.mark.parametrize("path", case_paths(), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_the_gpu_is_a_catalog_card_or_none(path: Path) -> None:
    case = load_case(path)
    assert "gpu_catalog" in case, "gpu_catalog: the hardware catalog's card, or null when the GPU is unknown"
    if case["gpu_catalog"] is not None:
        find_gpu(str(case["gpu_catalog"]))  # a ConfigError naming the catalog when it is not a card
    memory = case.get("gpu_memory_gib")
    assert memory is None or (isinstance(memory, int | float) and memory > 0)


def test_the_figure_reader_accepts_separators_and_rejects_other_digits() -> None:
    numbers = log_numbers("GPU KV cache size: 395,104 tokens\nAvailable KV cache memory: -2.14 GiB")
    assert appears_in(395104, numbers) and appears_in(-2.14, numbers)
    assert not appears_in(395105, numbers) and not appears_in(2.14, numbers)

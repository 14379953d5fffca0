"""models.json and the architecture files in corpus/models/: every entry resolves to what it says (a catalog model,
an architecture file with its Hugging Face config URL, or a reason), every row whose model resolves is priced
with about the parameters the source states, and rows on the newer catalog cards plan."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources

import pytest

from servelab.model.spec import ModelSpec
from servelab.predict.corpus import load_corpus
from servelab.predict.corpus.harness import model_table, resolve_model, setup
from servelab.predict.corpus.schema import Measurement

MODELS = resources.files("servelab.predict.corpus").joinpath("models")


@cache
def _rows() -> tuple[Measurement, ...]:
    return load_corpus()


def _by_model() -> dict[str, Measurement]:
    rows: dict[str, Measurement] = {}
    for row in _rows():
        rows.setdefault(row.model, row)
    return rows


def test_every_entry_is_a_catalog_id_a_sourced_file_or_a_reason() -> None:
    rows = _by_model()
    for name, entry in model_table().items():
        assert len(entry.keys() - {"note"}) == 1, name
        if "config" in entry:
            doc = json.loads(MODELS.joinpath(entry["config"]).read_text("utf-8"))
            assert doc["source"].startswith("https://huggingface.co/"), entry["config"]
            assert doc["id"] and doc["config"]["architectures"], entry["config"]
        elif "none" in entry:
            assert len(entry["none"]) > 20, name
        if name in rows:
            got = resolve_model(rows[name])
            assert isinstance(got, ModelSpec) == ("none" not in entry), (name, got)


def test_every_architecture_file_is_used() -> None:
    used = {e["config"] for e in model_table().values() if "config" in e}
    shipped = {p.name for p in MODELS.iterdir() if p.name.endswith(".json")}
    assert shipped == used


def _text_params_b(model: ModelSpec) -> float:
    """The decoder's parameters: what a source's 'N B' counts (no MTP layer, no vision tower)."""
    return sum(w.params for w in model.weights if w.name not in ("mtp", "vision")) / 1e9


def test_a_resolved_model_has_the_parameters_its_rows_state() -> None:
    """Within 3%: a model card's rounded total (Kimi-K2.5's '1T' is 1.03 T) or llama-bench's exact count."""
    for name, row in _by_model().items():
        model = resolve_model(row)
        if isinstance(model, str):
            continue
        assert _text_params_b(model) == pytest.approx(row.params_b, rel=0.03), name


@pytest.mark.parametrize(
    ("source", "model", "params_b"),
    [
        ("vllm-accelmark-h100-sxm", "Qwen/Qwen2.5-0.5B-Instruct", 0.49),
        (
            "llamacpp-dgx-spark",
            "deepseek2 30B.A3B Q8_0",
            29.94,
        ),  # GLM-4.7-Flash: MLA MoE, the MTP layer apart
        ("vllm-deplodock-qwen3-coder-next-pro6000-server", "Qwen/Qwen3-Coder-Next-FP8", 79.67),
    ],
)
def test_newly_mapped_models_plan_their_rows(source: str, model: str, params_b: float) -> None:
    row = next(r for r in _rows() if r.source.id == source and r.model == model and not r.excluded)
    got = setup(row)
    assert not isinstance(got, str), got
    assert _text_params_b(got.model) == pytest.approx(params_b, abs=0.01)


@pytest.mark.parametrize(
    ("source", "gpu"),
    [
        ("llamacpp-xiongjiedai-a40-v3", "a40"),
        ("llamacpp-xiongjiedai-a100-pcie-v3", "a100-80g-pcie"),
        ("llamacpp-xiongjiedai-4000-ada-v3", "rtx4000-ada"),
        ("llamacpp-xiongjiedai-5000-ada-v3", "rtx5000-ada"),
        ("llamacpp-xiongjiedai-3070-v3", "rtx3070"),
        ("llamacpp-xiongjiedai-3080-v3", "rtx3080"),
        ("llamacpp-xiongjiedai-4070ti-v3", "rtx4070-ti"),
        ("llamacpp-xiongjiedai-m1max-64gb", "m1-max"),
        ("llamacpp-xiongjiedai-m1-8gb", "m1"),
    ],
)
def test_rows_on_the_added_cards_name_them_and_plan(source: str, gpu: str) -> None:
    rows = [r for r in _rows() if r.source.id == source]
    assert rows and all(r.gpu == gpu for r in rows)
    got = setup(
        next(r for r in rows if r.params_b < 10)
    )  # the 8B rows fit every card, the 8 GB 3070 included
    assert not isinstance(got, str), got
    assert got.gpu.name == gpu and got.regime.unit in ("int8", "fp16", "bf16")  # Metal: fp16


def test_pipeline_stages_and_data_parallel_replicas_are_skipped_with_the_reason() -> None:
    """The plan takes one tensor-parallel group: a PP or DP serving row says so instead of failing to fit."""
    reasons = {
        r.label: setup(r)
        for r in _rows()
        if r.source.id in ("vllm-cloudrift-rtx4090-rtx5090-pro6000", "vllm-pegainfer-kimi-k25-h20")
        and (r.pp > 1 or r.flags.get("data_parallel_size"))
    }
    assert reasons
    for label, why in reasons.items():
        assert isinstance(why, str) and "is not modelled" in why, (label, why)
    assert any("DP 8 with expert parallelism" in str(why) for why in reasons.values())

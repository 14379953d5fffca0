"""`servelab predict` and `plan` on a GPU with a step model file ($SERVELAB_STEP_MODEL, made here by the step
model's own writer): every banded figure shown with its band, where its parameters came from, the bands kept in
the stored run, and a calibration profile of another release flagged stale (real SQLite, the CLI's own main)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from servelab.cli.app import main
from servelab.hardware.gpus import find_gpu
from servelab.predict.profiles import Profile, machine_key, save_profile
from servelab.predict.roofline import AchievedRates
from servelab.predict.stepmodel import STEP_MODEL_ENV, StepModel
from servelab.store import Store

PLAN_ARGS = ["Qwen/Qwen3-8B", "--gpu", "h100", "--engine", "vllm", "--quant", "bf16", "--context", "8192"]
LOAD = ["--concurrency", "1,4", "--requests", "8"]
BANDS = {
    "vllm|hbm|TPOT/ITL|1": (0.8, 1.25),
    "vllm|hbm|TPOT/ITL|2-16": (0.75, 1.4),
    "vllm|*|TTFT|*": (0.6, 1.7),
    "*|*|output tok/s|*": (0.7, 1.2),
}
BANDED = re.compile(r"^\d+\.\d \(\d+(\.\d)?-\d+(\.\d)?\)$")


@pytest.fixture
def step_model(tmp_path: Path, monkeypatch) -> StepModel:
    model = StepModel({"vllm.host": 1.5e-3, "vllm.launch.graphs": 4e-6}, {"note": "test-made"}, BANDS)
    path = tmp_path / "stepmodel.json"
    path.write_text(json.dumps(model.to_json()))
    monkeypatch.setenv(STEP_MODEL_ENV, str(path))
    return model


def _rows(out: str) -> dict[str, list[str]]:
    """The ladder table's rows by level, cells split on two or more spaces."""
    rows = {}
    for line in out.splitlines():
        cells = re.split(r"\s{2,}", line.strip())
        if cells and re.fullmatch(r"c=\d+", cells[0]):
            rows[cells[0]] = cells
    return rows


def test_predict_on_a_gpu_shows_each_figure_with_its_band(step_model: StepModel, capsys) -> None:
    assert main(["predict", *PLAN_ARGS, *LOAD, "--no-store"]) == 0
    out = capsys.readouterr().out
    rows = _rows(out)
    assert set(rows) == {"c=1", "c=4"}
    # level, stream tok/s, output tok/s, TTFT p50, TTFT p99, TPOT p50, ITL p50, ITL p99, errors
    for level, cells in rows.items():
        assert all(BANDED.match(cells[i]) for i in (1, 2, 3, 5, 6)), (level, cells)
        assert not BANDED.match(cells[4]) and not BANDED.match(cells[7])  # tails have no band
    assert "figures from: corpus (the GPU step model fitted to the public corpus (test-made))" in out


def test_predict_json_and_the_store_carry_band_and_source_per_figure(
    step_model: StepModel, tmp_path: Path, capsys
) -> None:
    db = tmp_path / "runs.db"
    assert main(["predict", *PLAN_ARGS, *LOAD, "--db", str(db), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["pricing"]["source"] == "corpus" and doc["pricing"]["stale"] is None
    levels = {lv["level"]: lv for lv in doc["targets"][0]["levels"]}
    tpot = levels["c=4"]["predicted"]["figures"]["tpot_ms_p50"]
    assert tpot["value"] == levels["c=4"]["tpot_ms"]["p50"] and tpot["source"] == "corpus"
    assert tpot["band"] == pytest.approx([tpot["value"] * 0.75, tpot["value"] * 1.4])
    single = levels["c=1"]["predicted"]["figures"]["tpot_ms_p50"]
    assert single["band"] == pytest.approx(
        [single["value"] * 0.8, single["value"] * 1.25]
    )  # batch 1's regime
    with Store.open(db, must_exist=True) as store:
        run = store.load_run(doc["run_id"])
    stored = {lv.level.label: lv.summary.predicted for lv in run.levels}
    assert stored["c=4"]["figures"]["tpot_ms_p50"]["band"] == pytest.approx(tpot["band"])
    assert run.meta.predicted is not None and run.meta.predicted.effective["source"] == "corpus"


def test_without_a_step_model_the_plans_figures_have_no_band(monkeypatch, capsys) -> None:
    monkeypatch.setenv(STEP_MODEL_ENV, "none")
    assert main(["predict", *PLAN_ARGS, *LOAD, "--no-store"]) == 0
    out = capsys.readouterr().out
    assert not any(BANDED.match(c) for cells in _rows(out).values() for c in cells)
    assert "figures from: plan" in out and "no band" in out


def test_a_calibration_of_another_release_is_used_and_flagged_stale(step_model: StepModel, capsys) -> None:
    card = find_gpu("h100")
    save_profile(
        Profile(
            machine=machine_key(card),
            machine_label=card.label,
            engine="vllm",
            quant="bf16",
            rates=AchievedRates(
                bandwidth_bytes_s=2.6e12, flops_s=6e14, step_overhead_s=2e-3, token_overhead_s=1e-5
            ),
            created="2026-12-01T10:00:00+00:00",
            runs=("run-a",),
            model="Qwen/Qwen3-8B",
            fit={"r2": 0.97},
            engine_version="0.8.5",
        )
    )
    assert main(["predict", *PLAN_ARGS, "--engine-version", "0.10.1", *LOAD, "--no-store", "--json"]) == 0
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert doc["pricing"]["source"] == "calibration"
    assert "0.8.5" in doc["pricing"]["stale"] and "0.10.1" in doc["pricing"]["stale"]
    assert "stale: calibration profile vllm/bf16" in err
    figures = doc["targets"][0]["levels"][0]["predicted"]["figures"]
    assert {f["source"] for f in figures.values()} == {"calibration"}
    assert all(f["band"] is None for f in figures.values())  # the calibration has no cross-validation
    assert main(["predict", *PLAN_ARGS, "--engine-version", "0.8.5", *LOAD, "--no-store", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["pricing"]["stale"] is None


def test_plan_states_the_step_models_speeds_with_their_bands(step_model: StepModel, capsys) -> None:
    assert main(["plan", *PLAN_ARGS]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("decode ceiling"))
    assert re.search(r"expected \(corpus\): [\d.]+ \(\d+-\d+\) / [\d.]+ \(\d+-\d+\) tok/s", line), line
    assert "expected speeds from: corpus" in out
    assert main(["plan", *PLAN_ARGS, "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)["plans"][0]
    assert plan["speeds"]["source"] == "corpus" and plan["speeds"]["prefill_short_tok_s"] > 0
    low, high = plan["speeds"]["bands"]["decode_short"]
    short = plan["decode_expected_tok_s"]["short"]
    assert low == pytest.approx(short / 1.25, rel=1e-3) and high == pytest.approx(short / 0.8, rel=1e-3)

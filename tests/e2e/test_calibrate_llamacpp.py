"""`servelab calibrate` on a short ladder against a REAL llama-server: a profile that `predict` then uses (and
says so), with its fit residual reported; bad input is one line. No timing is asserted (accuracy:
benchmarks/predict_vs_measured.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servelab.bench.config import BenchConfig
from servelab.bench.runner import run
from servelab.bench.schedule import StopRule
from servelab.bench.workloads import WorkloadSpec
from servelab.cli.app import main
from servelab.modelmake import make_model
from servelab.modelmake.shapes import shape_for
from servelab.store import Store
from tests.runs_factory import store_run

# `--gpu cpu` reads this machine's bandwidth: measured once a run (conftest.py), not once a command
pytestmark = pytest.mark.usefixtures("measured_host")


@pytest.fixture
def measured(llama_server, tmp_path: Path) -> tuple[Path, str, Path]:
    # larger than the shared tiny model, so that a decode step (~1 ms) stands well above the 100 us under which
    # calibrate takes two chunks as one read
    shape = shape_for("dense", hidden=512, layers=4, heads=8, kv_heads=4, head_dim=64, ffn=1408)
    model = make_model("dense", tmp_path / "calibrate.gguf", shape).path
    server = llama_server(model, "-c", "1024", "-np", "2")
    db = tmp_path / "runs.db"
    config = BenchConfig(
        targets=(server.url,),
        concurrency=(1, 2),
        workload=WorkloadSpec("short", 32, 24),
        stop=StopRule(requests=3),
        warmup=1,
        chat=False,
    )
    with Store.open(db) as store:
        run_id = run(config, store).run_id
    assert run_id is not None
    return db, run_id, model


def test_calibrate_saves_a_profile_that_predict_uses(measured, capsys) -> None:
    db, run_id, model = measured
    assert main(["calibrate", run_id, "--db", str(db), "--gpu", "cpu", "--json"]) == 0
    out, err = capsys.readouterr()
    fitted = json.loads(out)
    profile, path = fitted["profile"], Path(fitted["path"])
    assert path.is_file() and json.loads(path.read_text())["effective"] == profile["effective"]
    assert (
        profile["engine"] == "llamacpp"
        and profile["runs"] == [run_id]
        and profile["machine"].startswith("cpu:")
    )
    assert profile["effective"]["bandwidth_bytes_s"] > 0 and profile["effective"]["flops_s"] > 0
    fit = profile["fit"]
    assert fit["gaps"] > 0 and fit["prefills"] > 0, fit
    assert fit["intervals"] == fit["gaps"] + fit["prefills"]
    assert fit["median_relative"] >= 0 and fit["r2"] <= 1
    assert [lv["level"] for lv in fitted["levels"]] == ["c=1", "c=2"]
    assert "calibrating llamacpp" in err
    with Store.open(db, must_exist=True) as store:  # the release the runs measured, as the server reported it
        assert profile["engine_version"] == store.load_run(run_id).targets[0].info.version
    assert profile["engine_version"]

    args = [
        "predict",
        str(model),
        "--gpu",
        "cpu",
        "--engine",
        "llamacpp",
        "--parallel",
        "2",
        "--context",
        "512",
        "--concurrency",
        "1,2",
        "--requests",
        "4",
        "--completions",
    ]
    assert main([*args, "--db", str(db), "--json"]) == 0
    out, err = capsys.readouterr()
    assert f"calibration profile llamacpp/{profile['quant']}" in err and str(path) in err
    assert profile["created"][:10] in err and "effective figures: calibration" in err
    with Store.open(db, must_exist=True) as store:
        prediction = store.load_run(json.loads(out)["run_id"]).meta.predicted
        assert prediction is not None
        predicted = prediction.effective
    assert predicted == {**profile["effective"], "source": "calibration"}

    assert main([*args, "--no-store", "--no-calibration"]) == 0
    err = capsys.readouterr().err
    assert "calibration profile" not in err and "effective figures: plan" in err

    assert (
        main(
            [
                "plan",
                str(model),
                "--gpu",
                "cpu",
                "--engine",
                "llamacpp",
                "--parallel",
                "2",
                "--context",
                "512",
            ]
        )
        == 0
    )
    assert "calibration profile llamacpp/" in capsys.readouterr().err


def test_bad_runs_are_one_line(measured, capsys, tmp_path: Path) -> None:
    db, run_id, _ = measured
    assert main(["calibrate", "no-such-run", "--db", str(db), "--gpu", "cpu"]) != 0
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1 and "no run 'no-such-run'" in err

    other = store_run(db, engines=("vllm",))
    assert main(["calibrate", run_id, other, "--db", str(db), "--gpu", "cpu"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "different engines" in err and "vllm" in err

    assert main(["calibrate", run_id, "--db", str(db)]) == 2
    assert "give --gpu" in capsys.readouterr().err

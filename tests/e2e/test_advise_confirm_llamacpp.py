"""`servelab advise MODEL --gpu cpu --confirm` against a REAL llama-server on this CPU, on the smallest model the
project makes: the winner launched with the plan's own flags, verified, benched around the advised load,
calibrated (a profile saved that the next advise uses) and re-predicted, advice vs measurement per figure. No
accuracy is asserted here (the figures move with the shared host; docs/advise.md gives measured ones): what is
asserted is that each figure came from where it says."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servelab.cli.app import main
from servelab.modelmake import make_model
from servelab.store import Store

SLO = "ttft_p99_ms=60000,tpot_p99_ms=5000"  # loose: this test checks the loop, not the machine's speed


def test_confirm_launches_benches_calibrates_and_reports_advice_vs_measurement(
    llama_server_bin: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.setenv("SERVELAB_LLAMA_SERVER", str(llama_server_bin))
    model = make_model("dense", tmp_path / "dense.gguf").path
    db = tmp_path / "runs.db"
    args = [
        "advise",
        str(model),
        "--gpu",
        "cpu",
        "--engine",
        "llamacpp",
        "--users",
        "2",
        "--output-tokens",
        "8",
        "--input-tokens",
        "32",
        "--slo",
        SLO,
        "--confirm",
        "--db",
        str(db),
    ]
    assert main([*args, "--json"]) == 0
    out, err = capsys.readouterr()
    doc = json.loads(out)
    c = doc["confirmation"]
    assert c["ran"] is True and c["candidate"] == doc["front"][0]["candidate"], c
    assert c["load"] == 2 and [lv["load"] for lv in c["levels"]] == [1, 2, 4]
    launched = c["commands"][0].split()
    planned = doc["front"][0]["command"].split()
    assert (
        launched[1:3] == ["-m", str(model)]
        and planned[planned.index("--port") + 2 :]
        == launched[
            launched.index("--port") + 2 : launched.index("--port")
            + 2
            + len(planned)
            - planned.index("--port")
            - 2
        ]
    )  # the plan's own flags, after the model, host and port the launcher writes
    assert (
        "confirm: launching llama.cpp" in err and "confirm: verified" in err and "calibrated llamacpp/" in err
    )
    with Store.open(db, must_exist=True) as store:
        (run,) = [store.load_run(r) for r in c["run_ids"]]
    assert sorted(level.label for _, level in run.level_stats) == ["c=1", "c=2", "c=4"]
    figures = {f["figure"]: f for f in c["figures"]}
    assert set(figures) == {"goodput_tok_s", "ttft_p99_ms", "tpot_p99_ms"}
    assert all(f["advised"] and f["measured"] and f["repredicted"] for f in figures.values()), figures
    measured = next(lv for lv in c["levels"] if lv["load"] == 2)
    assert figures["goodput_tok_s"]["measured"] == measured["goodput_tok_s"]
    assert c["meets_slo"] is (measured["misses"] == [])
    profile = Path(c["profile"])
    assert profile.is_file() and json.loads(profile.read_text())["runs"] == c["run_ids"]
    assert c["verdict"].startswith("measured at 2 users: ")

    # the next advice for this machine predicts with the calibration --confirm saved
    assert main([*args[:-3], "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    winner = next(r for r in again["ranked"] if r["candidate"] == c["candidate"])
    assert winner["effective_figures"] == "calibration"

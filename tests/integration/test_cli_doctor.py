"""`servelab doctor` on this GPU-less machine, through the real probe."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servelab.cli.app import main


@pytest.fixture(autouse=True)
def _no_degrading_env(monkeypatch):
    for name in ("NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE", "CUDA_VISIBLE_DEVICES"):
        monkeypatch.delenv(name, raising=False)


def test_json_reports_no_gpu_and_still_checks_the_environment(capsys, monkeypatch):
    monkeypatch.setenv("NCCL_P2P_DISABLE", "1")
    assert main(["doctor", "--json"]) == 0
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert doc["gpus"] == [] and doc["pairs"] == []
    ids = [f["id"] for f in doc["findings"]]
    assert ids[0] == "no-gpu" and "env-nccl-p2p-disable" in ids
    assert next(f for f in doc["findings"] if f["id"] == "env-nccl-p2p-disable")["severity"] == "info"
    assert err == ""


def test_table_output_lists_ranked_findings(capsys):
    assert main(["doctor"]) == 0
    out, err = capsys.readouterr()
    assert "Findings" in out and "1. INFO No NVIDIA GPU is visible" in out and "fix:" in out
    assert err == ""


def test_burn_and_p2p_test_are_skipped_with_reasons_not_errors(capsys):
    assert main(["doctor", "--burn", "--burn-seconds", "1", "--p2p-test", "--json"]) == 0
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert doc["burn"]["status"] == "skipped" and doc["burn"]["reason"]
    assert doc["p2p_test"][0]["status"] == "skipped"
    assert {"burn-skipped", "p2p-test-skipped"} <= {f["id"] for f in doc["findings"]}
    assert ("burning GPU0" in err) == bool(doc["gpus"])  # no claim of a burn on a machine without a GPU


@pytest.mark.parametrize("value", ["0", "nan", "inf", "601"])
def test_bad_burn_length_is_a_one_line_usage_error(capsys, value):
    assert main(["doctor", "--burn-seconds", value]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.strip().splitlines() == [
        f"servelab: error: --burn-seconds must be a number above 0 and at most 600 seconds, got {float(value)}"
    ]


def test_from_renders_a_recorded_machine(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "220")  # a wide terminal, so table cells are not wrapped
    assert (
        main(["doctor", "--from", str(Path(__file__).parent.parent / "fixtures/doctor/kvm-2x3090-pcie")]) == 0
    )
    out, _ = capsys.readouterr()
    assert "NVIDIA GeForce RTX 3090" in out and "290 W (default 350 W)" in out and "pcie-host-staged" in out
    assert out.index("1. CRITICAL Peer-to-peer is blocked") < out.index(
        "2. WARNING This is a virtual machine"
    )


def test_record_then_from_gives_the_same_json(capsys, tmp_path):
    assert main(["doctor", "--json", "--record", str(tmp_path / "here")]) == 0
    live, err = capsys.readouterr()
    assert "recorded this machine" in err
    assert main(["doctor", "--json", "--from", str(tmp_path / "here")]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads(live)


@pytest.mark.parametrize("argv", [["--from", "/nonexistent-fixture"], ["--from", ".", "--burn"]])
def test_bad_from_is_a_usage_error(capsys, argv):
    assert main(["doctor", *argv]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1 and err.startswith("servelab: error: ")


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (bytes(range(256)) * 4, "not a readable JSON file"),
        (b"[1, 2]", "expected a JSON object"),
        (b'{"gpus": 5}', "'gpus' must be a list of objects"),
    ],
)
def test_a_broken_recorded_probe_is_one_line(tmp_path, capsys, body, says):
    (tmp_path / "nvml.json").write_bytes(body)
    assert main(["doctor", "--from", str(tmp_path)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and says in err and "Traceback" not in err

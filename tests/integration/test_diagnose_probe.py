"""The real probe on this machine (NVML if present, files, `systemd-detect-virt`): a recording replays the same."""

from __future__ import annotations

import json

from servelab.diagnose.doctor import run_doctor
from servelab.diagnose.probe import RealProbe, RecordedProbe, RecordingProbe


def test_recording_this_machine_replays_to_the_same_report(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-never-recorded")
    monkeypatch.setenv("NCCL_SHM_DISABLE", "1")
    with RealProbe() as real:
        recording = RecordingProbe(real)
        live = run_doctor(recording)
        recording.save(tmp_path / "rec")
    replayed = run_doctor(RecordedProbe(tmp_path / "rec"))
    assert replayed.to_json() == live.to_json()
    saved_env = json.loads((tmp_path / "rec" / "env.json").read_text())
    assert "OPENAI_API_KEY" not in saved_env and saved_env["NCCL_SHM_DISABLE"] == "1"

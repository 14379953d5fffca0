"""`servelab bench --power-hz/--no-power`: GPU power is sampled during each level and stored with the run.

There is no GPU here, so `gpu_sampler` is pointed at a real `PowerSampler` over NVML answers recorded from an
RTX 3090 (tests/fixtures/doctor/one-gpu-3090, see its SOURCE.md); the bench runs against `servelab sim` on
loopback and writes to a real SQLite store.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from servelab.cli.app import main
from servelab.cli.bench import GuardedSampler
from servelab.diagnose.power import PowerSampler
from servelab.diagnose.probe import RecordedProbe
from servelab.store import Store
from tests.bench_sim import sim_process

RECORDED = Path(__file__).parent.parent / "fixtures" / "doctor" / "one-gpu-3090"
BENCH = ["--concurrency", "1,2", "--requests", "2", "--output-tokens", "4", "--json"]


class LostGpuProbe(RecordedProbe):
    """The recorded card, whose driver then fails every query (as NVML does when a GPU falls off the bus)."""

    def gpu(self, index: int, query: str):
        raise RuntimeError("NVML_ERROR_GPU_IS_LOST")


@pytest.mark.parametrize("hz", ["0", "10.5", "-1"])
def test_a_power_rate_outside_1_to_10_is_a_usage_error(hz: str, capsys) -> None:
    code = main(["bench", "http://127.0.0.1:1", "--power-hz", hz])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "--power-hz must be between 1 and 10" in err and "Traceback" not in err


def _patch_sampler(monkeypatch, probe_type=RecordedProbe) -> list[float]:
    asked: list[float] = []

    def recorded_sampler(hz: float = 5.0, gpus=None) -> PowerSampler:
        asked.append(hz)
        return PowerSampler(probe_type(RECORDED), hz=hz, gpus=gpus)

    monkeypatch.setattr("servelab.diagnose.power.gpu_sampler", recorded_sampler)
    return asked


def _bench(url: str, db: Path, *extra: str) -> tuple[int, dict[str, list[dict]], int]:
    code = main(["bench", url, *BENCH, "--db", str(db), *extra])
    with Store.open(db) as store:
        stored = store.load_run(store.list_runs()[-1].id)
    return code, stored.samples, len(stored.requests)


def test_power_is_sampled_during_each_level_and_stored(monkeypatch, tmp_path: Path, capsys) -> None:
    asked = _patch_sampler(monkeypatch)
    with sim_process("--ttft-ms", "5", "--itl-ms", "5") as url:
        code, samples, requests = _bench(url, tmp_path / "runs.db", "--power-hz", "10")
    assert code == 0 and asked == [10.0] and requests >= 4
    rows = samples["gpu_power"]
    assert len(rows) >= 4  # a sample at the start and one at the end of each of the two levels
    assert {(r["gpu"], r["power_w"]) for r in rows} == {(0, 24.01)}  # the recorded card's 24010 mW


def test_each_power_sample_says_its_target_level_and_repeat(monkeypatch, tmp_path: Path, capsys) -> None:
    _patch_sampler(monkeypatch)
    with sim_process("--ttft-ms", "5", "--itl-ms", "5") as url:
        code, samples, _ = _bench(url, tmp_path / "runs.db", "--power-hz", "10", "--repeat", "2")
    assert code == 0
    windows = [(r["target_index"], r["level"], r["repeat"]) for r in samples["gpu_power"]]
    assert list(dict.fromkeys(windows)) == [
        (0, "c=1", 0),
        (0, "c=1", 1),
        (0, "c=2", 0),
        (0, "c=2", 1),
    ]  # in order
    assert all(windows.count(w) >= 2 for w in set(windows))  # the start and stop samples of each window


def test_no_power_samples_nothing(monkeypatch, tmp_path: Path, capsys) -> None:
    asked = _patch_sampler(monkeypatch)
    with sim_process("--ttft-ms", "5", "--itl-ms", "5") as url:
        code, samples, _ = _bench(url, tmp_path / "runs.db", "--no-power")
    assert code == 0 and asked == [] and "gpu_power" not in samples


def test_a_failing_sampler_warns_once_and_the_run_completes(monkeypatch, tmp_path: Path, capsys) -> None:
    _patch_sampler(monkeypatch, LostGpuProbe)
    with sim_process("--ttft-ms", "5", "--itl-ms", "5") as url:
        code, samples, requests = _bench(url, tmp_path / "runs.db")
    err = capsys.readouterr().err
    assert code == 0 and requests >= 4 and "gpu_power" not in samples
    assert err.count("warning: gpu_power sampling stopped") == 1 and "NVML_ERROR_GPU_IS_LOST" in err


def test_a_sampler_failing_at_stop_gives_no_rows_and_is_not_restarted(capsys) -> None:
    class StopFails:
        kind, starts = "gpu_power", 0

        def start(self) -> None:
            self.starts += 1

        def stop(self) -> list[dict]:
            raise OSError("driver went away")

    from servelab.cli.output import stderr_console

    inner = StopFails()
    guarded = GuardedSampler(inner, stderr_console())
    guarded.start()
    assert guarded.stop() == [] and guarded.kind == "gpu_power"
    guarded.start()
    assert guarded.stop() == [] and inner.starts == 1
    assert "sampling stopped (stop: OSError: driver went away)" in capsys.readouterr().err

"""PowerSampler over a recorded probe (NVML cannot run here), and the per-GPU summaries."""

from __future__ import annotations

import itertools
import time
from pathlib import Path

import pytest

from servelab.diagnose.power import (
    POWER_FIELDS,
    PowerSampler,
    gpu_sampler,
    mean_power_w,
    summarize,
)
from servelab.diagnose.probe import RecordedProbe
from servelab.errors import ConfigError

NVLINK = Path(__file__).parent.parent / "fixtures" / "doctor" / "nvlink-2x3090"


def test_sampler_rows_have_the_documented_fields_and_the_recorded_watts():
    ticks = itertools.count(1_000, 250_000_000)  # a fake monotonic clock: 0.25 s per reading
    sampler = PowerSampler(RecordedProbe(NVLINK), hz=10, clock_ns=lambda: next(ticks))
    rows = sampler.sample_once()
    assert [tuple(r) for r in rows] == [POWER_FIELDS, POWER_FIELDS]
    assert [(r["gpu"], r["power_w"], r["t_ns"]) for r in rows] == [(0, 188.45, 1_000), (1, 25.69, 1_000)]


def test_background_thread_samples_until_stopped():
    sampler = PowerSampler(RecordedProbe(NVLINK), hz=10, gpus=[1])
    sampler.start()
    time.sleep(0.35)
    rows = sampler.stop()
    assert len(rows) >= 3  # one at start, one at stop, and the thread's in between
    assert {r["gpu"] for r in rows} == {1}
    times = [r["t_ns"] for r in rows]
    assert times == sorted(times) and times[-1] > times[0]
    assert sampler.stop() == []  # already stopped: nothing new
    sampler.start()  # the bench runner starts the same sampler again for each level
    with pytest.raises(RuntimeError):
        sampler.start()
    second = sampler.stop()
    assert len(second) >= 2 and second[0]["t_ns"] >= times[-1]
    assert sampler.kind == "gpu_power"


@pytest.mark.parametrize("hz", [0.5, 11, 0])
def test_rate_outside_one_to_ten_hz_is_refused(hz):
    with pytest.raises(ConfigError, match="1–10 Hz"):
        PowerSampler(RecordedProbe(NVLINK), hz=hz)


def test_mean_power_and_summary_are_exact():
    rows = [
        {"t_ns": 0, "gpu": 0, "power_w": 100.0, "sm_util_pct": 40, "mem_util_pct": 90},
        {"t_ns": 0, "gpu": 1, "power_w": 300.0, "sm_util_pct": None, "mem_util_pct": 10},
        {"t_ns": 1, "gpu": 0, "power_w": 140.0, "sm_util_pct": 60, "mem_util_pct": 70},
        {"t_ns": 1, "gpu": 1, "power_w": None, "sm_util_pct": 20, "mem_util_pct": 30},
    ]
    assert mean_power_w(rows) == pytest.approx(180.0)  # (100 + 300 + 140) / 3
    assert mean_power_w(rows, gpu=0) == pytest.approx(120.0)
    assert mean_power_w([]) is None
    summary = summarize(rows)
    assert summary[0] == {
        "samples": 2,
        "mean_power_w": 120.0,
        "max_power_w": 140.0,
        "mean_sm_util_pct": 50.0,
        "mean_mem_util_pct": 80.0,
    }
    assert summary[1]["max_power_w"] == 300.0 and summary[1]["mean_sm_util_pct"] == 20.0


def test_no_sampler_without_nvidia_gpus():
    assert gpu_sampler(hz=5) is None  # this machine has no NVIDIA driver


def test_a_probe_failing_mid_window_ends_sampling_quietly_and_says_why() -> None:
    import time as _time

    from servelab.diagnose.power import PowerSampler

    class Flaky:
        calls = 0

        def gpu_count(self) -> int:
            return 1

        def gpu(self, index: int, query: str):
            Flaky.calls += 1
            if (
                Flaky.calls > len(POWER_FIELDS) - 2
            ):  # the start() sample (a query per figure) works, then the driver goes away
                raise OSError("driver gone")
            return 1000

    sampler = PowerSampler(Flaky(), hz=10)
    sampler.start()
    _time.sleep(0.35)
    assert sampler.error is not None and "driver gone" in sampler.error
    sampler._stop.set()
    sampler._thread.join()

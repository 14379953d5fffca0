"""The host bandwidth probe on this machine (a real measurement, no stub) and its per-machine cache.

The figures are not asserted beyond "positive and finite": speed is for benchmarks/, not tests.
"""

from __future__ import annotations

import json
import math
from functools import partial

import pytest

from servelab.hardware import bandwidth
from servelab.hardware.bandwidth import host_bandwidth, measure
from servelab.hardware.cpu import read_cpu
from servelab.hardware.gpus import find_gpu

QUICK = partial(measure, repeats=1)


def test_probe_gives_a_positive_finite_bandwidth() -> None:
    result = measure(read_cpu(), repeats=2)
    assert len(result.copy_gb_s) == len(result.triad_gb_s) == 2
    assert all(math.isfinite(x) and x > 0 for x in (*result.copy_gb_s, *result.triad_gb_s))
    assert result.best_gb_s == max(*result.copy_gb_s, *result.triad_gb_s)
    assert result.array_bytes >= bandwidth.MIN_ARRAY_BYTES and result.threads >= 1
    assert "GB/s measured" in result.summary


def test_cache_is_reused_then_remeasured_on_request() -> None:
    cpu = read_cpu()
    first, cached = host_bandwidth(cpu, probe=QUICK)
    assert not cached and bandwidth.cache_path().is_file()
    again, cached = host_bandwidth(cpu, probe=QUICK)
    assert cached and again == first
    fresh, cached = host_bandwidth(cpu, remeasure=True, probe=QUICK)
    assert not cached
    stored = json.loads(bandwidth.cache_path().read_text())["machines"][cpu.key]
    assert tuple(stored["copy_gb_s"]) == fresh.copy_gb_s


@pytest.mark.parametrize(
    "content",
    [
        b"{not json",
        b"\xff\xfe\x00",
        b'{"version": 1, "machines": []}',
        b'{"version": 1, "machines": {"KEY": {"copy_gb_s": [-1], "triad_gb_s": [2], "threads": 1,'
        b' "array_bytes": 1, "measured_at": "x"}}}',
        b'{"version": 1, "machines": {"KEY": {"copy_gb_s": "fast"}}}',
    ],
)
def test_a_corrupt_cache_is_measured_again(content: bytes) -> None:
    cpu = read_cpu()
    path = bandwidth.cache_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content.replace(b"KEY", json.dumps(cpu.key)[1:-1].encode()))
    result, cached = host_bandwidth(cpu, probe=QUICK)
    assert not cached and result.best_gb_s > 0
    assert cpu.key in json.loads(path.read_text())["machines"]


def test_cpu_is_a_device_name() -> None:
    device = find_gpu("cpu")
    assert device.is_cpu and device.runtime_context_bytes == 0
    assert device.bandwidth_gb_s > 0 and device.bf16_tflops > 0 and device.memory_bytes > 0
    assert "measured" in device.source and "peak estimated" in device.source
    assert find_gpu("CPU").bandwidth_gb_s == device.bandwidth_gb_s  # the cached figure, not a new probe

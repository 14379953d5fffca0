"""`PowerSampler`: NVML power, utilisation and clocks per GPU, sampled at 1–10 Hz on a background thread.

Rows are plain dicts (``t_ns`` from ``time.monotonic_ns``, ``gpu``, ``power_w``, ``sm_util_pct``,
``mem_util_pct``, ``sm_clock_mhz``, ``mem_clock_mhz``, ``memory_used_bytes``: the device memory in use, every
process's), ready for ``Store.add_samples(run_id, "gpu_power",
rows)``. One sample is taken at `start()` and one at `stop()`, so even a short window yields data; a sampler
can run many windows (the bench runner starts and stops it around each concurrency level).

    sampler = gpu_sampler(hz=5)        # None on a machine without NVIDIA GPUs
    sampler.start(); ...; rows = sampler.stop()
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from statistics import fmean

from servelab.diagnose.probe import Probe, RealProbe
from servelab.errors import ConfigError

POWER_FIELDS = (
    "t_ns",
    "gpu",
    "power_w",
    "sm_util_pct",
    "mem_util_pct",
    "sm_clock_mhz",
    "mem_clock_mhz",
    "memory_used_bytes",
)
_QUERIES = POWER_FIELDS[3:]  # named as the row fields


class PowerSampler:
    """Samples `gpus` (default: all) through `probe` every 1/`hz` seconds between `start()` and `stop()`."""

    def __init__(
        self,
        probe: Probe,
        hz: float = 5.0,
        gpus: Sequence[int] | None = None,
        clock_ns: Callable[[], int] = time.monotonic_ns,
        owns_probe: bool = False,
    ) -> None:
        if not 1 <= hz <= 10:
            raise ConfigError(f"power sampling rate must be 1–10 Hz, got {hz}")
        self._probe = probe
        self._period_s = 1.0 / hz
        self._gpus = list(range(probe.gpu_count())) if gpus is None else list(gpus)
        self._clock_ns = clock_ns
        self._owns_probe = owns_probe
        self._rows: list[dict] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: str | None = None  # why background sampling stopped early, if it did

    kind = "gpu_power"  # the store's sample kind for these rows

    def sample_once(self) -> list[dict]:
        """One row per GPU, now."""
        t_ns = self._clock_ns()
        rows = []
        for gpu in self._gpus:
            milliwatts = self._probe.gpu(gpu, "power_usage_mw")
            row = {"t_ns": t_ns, "gpu": gpu, "power_w": None if milliwatts is None else milliwatts / 1000}
            row.update({field: self._probe.gpu(gpu, field) for field in _QUERIES})
            rows.append(row)
        return rows

    def _loop(self, stop: threading.Event, rows: list[dict]) -> None:
        try:
            while not stop.wait(self._period_s):
                rows.extend(self.sample_once())
        except (
            Exception
        ) as exc:  # a driver gone mid-run ends sampling, never the run (nor a thread traceback)
            self.error = f"power sampling stopped: {exc}"

    def start(self) -> None:
        """Begin a sampling window (a sampler can be started again after `stop()`)."""
        if self._thread is not None:
            raise RuntimeError("PowerSampler.start() called while already sampling")
        self._rows, self._stop = self.sample_once(), threading.Event()
        self._thread = threading.Thread(
            target=self._loop, args=(self._stop, self._rows), name="servelab-power", daemon=True
        )
        self._thread.start()

    def stop(self) -> list[dict]:
        """End the window and return its rows, in time order ([] when it was not started)."""
        if self._thread is None:
            return []
        self._stop.set()
        self._thread.join()
        self._thread = None
        self._rows.extend(self.sample_once())
        return list(self._rows)

    def close(self) -> None:
        """Release NVML if this sampler opened it."""
        if self._owns_probe and hasattr(self._probe, "close"):
            self._probe.close()


def gpu_sampler(hz: float = 5.0, gpus: Sequence[int] | None = None) -> PowerSampler | None:
    """A sampler (not started) over this machine's NVIDIA GPUs, or None when NVML sees none.

    For the bench runner: ``samplers=[s] if (s := gpu_sampler()) else []``; rows go to the store as "gpu_power".
    """
    probe = RealProbe()
    if probe.nvml_error() is not None or probe.gpu_count() == 0:
        probe.close()
        return None
    return PowerSampler(probe, hz=hz, gpus=gpus, owns_probe=True)


def mean_power_w(rows: Sequence[dict], gpu: int | None = None) -> float | None:
    """Mean power over the rows (of one GPU, or of all GPUs: the mean per-GPU draw); None without readings."""
    watts = [r["power_w"] for r in rows if r.get("power_w") is not None and (gpu is None or r["gpu"] == gpu)]
    return fmean(watts) if watts else None


def summarize(rows: Sequence[dict]) -> dict[int, dict[str, float | int | None]]:
    """Per GPU: samples, mean and max power (W), mean SM and memory utilisation (%)."""
    summary = {}
    for gpu in sorted({r["gpu"] for r in rows}):
        mine = [r for r in rows if r["gpu"] == gpu]

        def mean(field: str, mine: list[dict] = mine) -> float | None:
            values = [r[field] for r in mine if r.get(field) is not None]
            return fmean(values) if values else None

        powers = [r["power_w"] for r in mine if r.get("power_w") is not None]
        summary[gpu] = {
            "samples": len(mine),
            "mean_power_w": mean("power_w"),
            "max_power_w": max(powers) if powers else None,
            "mean_sm_util_pct": mean("sm_util_pct"),
            "mean_mem_util_pct": mean("mem_util_pct"),
        }
    return summary

"""A level as the server counted it, from its /metrics: each counter's growth over the level (the before and after
snapshots) and each gauge sampled while the level runs (peak, mean, samples). Which series: the engine's bench
extras ``SERVER_METRICS`` (engines/<e>/bench_extras.py); stored in the level's summary as ``server``.

The sampler keeps the raw texts and parses them after the level, so the load loop's process spends the level on
the requests, not on Prometheus parsing.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from servelab.engines.http import HttpProbe
from servelab.engines.prometheus import ServerMetric, server_values

GAUGE_INTERVAL_S = 0.5  # how often a level's gauges are read


def level_server_metrics(
    before: str | None, after: str | None, sampled: list[str], metrics: tuple[ServerMetric, ...]
) -> dict[str, Any]:
    """``{"counters": {key: growth}, "gauges": {key: {"max", "mean", "samples"}}}``, each part only when read."""
    counters = tuple(m for m in metrics if m.kind == "counter")
    gauges = tuple(m for m in metrics if m.kind == "gauge")
    out: dict[str, Any] = {}
    if counters and before is not None and after is not None:
        start, end = server_values(before, counters), server_values(after, counters)
        out["counters"] = {key: _number(value - start.get(key, 0.0)) for key, value in end.items()}
    rows = [server_values(text, gauges) for text in sampled] if gauges else []
    read = {m.key: [row[m.key] for row in rows if m.key in row] for m in gauges}
    if any(read.values()):
        out["gauges"] = {key: _gauge(values) for key, values in read.items() if values}
    return out


def pool_server_metrics(levels: list[dict[str, Any]]) -> dict[str, Any]:
    """Repeats of one level together: counters added, gauges' peak the highest, mean weighted by samples."""
    out: dict[str, Any] = {}
    counters: dict[str, float] = {}
    for level in levels:
        for key, value in level.get("counters", {}).items():
            counters[key] = counters.get(key, 0) + value
    if counters:
        out["counters"] = counters
    gauges: dict[str, dict[str, float]] = {}
    for level in levels:
        for key, g in level.get("gauges", {}).items():
            seen = gauges.setdefault(key, {"max": g["max"], "sum": 0.0, "samples": 0})
            seen["max"] = max(seen["max"], g["max"])
            seen["sum"] += g["mean"] * g["samples"]
            seen["samples"] += g["samples"]
    if gauges:
        out["gauges"] = {
            k: {"max": g["max"], "mean": round(g["sum"] / g["samples"], 4), "samples": int(g["samples"])}
            for k, g in gauges.items()
        }
    return out


def _gauge(values: list[float]) -> dict[str, float]:
    return {"max": _number(max(values)), "mean": round(sum(values) / len(values), 4), "samples": len(values)}


def _number(value: float) -> float:
    """Counts stay whole numbers in the JSON (Prometheus writes every value as a float)."""
    return int(value) if float(value).is_integer() else round(value, 6)


class GaugeSampler:
    """Reads ``/metrics`` every ``interval_s`` on a thread from ``start()`` to ``stop()``; keeps the texts."""

    def __init__(self, probe: HttpProbe, interval_s: float = GAUGE_INTERVAL_S) -> None:
        self.probe = probe
        self.interval_s = interval_s
        self._texts: list[str] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="servelab-gauges", daemon=True)
        self._thread.start()

    def stop(self) -> list[str]:
        """The texts read while it ran; the thread is joined."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        return list(self._texts)

    def _loop(self) -> None:
        while True:
            started = time.monotonic()
            self._read()
            if self._stop.wait(max(0.0, self.interval_s - (time.monotonic() - started))):
                return

    def _read(self) -> None:
        try:
            text = self.probe.get_text("/metrics")
        except Exception:  # a read that fails is a missing sample, never a failed level
            return
        if text is not None:
            self._texts.append(text)

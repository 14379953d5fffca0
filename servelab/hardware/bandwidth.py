"""Host memory bandwidth, measured: a short STREAM-style probe (copy and triad), cached per machine.

STREAM (https://www.cs.virginia.edu/stream/) counts copy `a = b` as 2 x N bytes and triad `a = b + s*c` as
3 x N bytes moved (write-allocate traffic not counted). Here each of `threads` threads (one per usable
physical core; numpy releases the GIL in its copy and arithmetic loops) works on its own slice of float64
arrays each at least 4x the last-level cache (and 64 MiB), so the data comes from DRAM. Triad runs in
chunks of a quarter of a 1 MiB L2, so numpy's two passes (`a = s*c`, then `a += b`) keep the intermediate
in cache and memory sees the three streams STREAM counts. Each kernel runs `repeats` times after one
warm-up; the device's figure is the best of all repeats (STREAM's habit: the best is the least disturbed).

The result is cached in servelab's cache dir (`hardware/host-bandwidth.json`) keyed by CPU model, memory
size and usable cores; `remeasure=True` redoes it; an unreadable or corrupt cache is measured again.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from servelab import paths
from servelab.errors import DeviceError
from servelab.hardware.cpu import CPU

MIB = 1024**2
MIN_ARRAY_BYTES = 64 * MIB
LLC_MULTIPLE = 4
MAX_MEMORY_SHARE = 0.125  # the three arrays together never take more than this share of host memory
CHUNK_BYTES = 256 * 1024
REPEATS = 5
CACHE_VERSION = 1


@dataclass(frozen=True)
class Bandwidth:
    """One probe's result; GB/s are decimal (1e9 bytes/s), per repeat."""

    copy_gb_s: tuple[float, ...]
    triad_gb_s: tuple[float, ...]
    threads: int
    array_bytes: int
    measured_at: str  # ISO-8601, UTC

    @property
    def best_gb_s(self) -> float:
        return max(*self.copy_gb_s, *self.triad_gb_s)

    @property
    def summary(self) -> str:
        """'23.4 GB/s measured 2026-12-01 10:00 UTC (copy 20.1-22.0, triad 21.5-23.4 GB/s; ...)'."""
        when = self.measured_at.replace("T", " ")[:16] + " UTC"
        spread = ", ".join(
            f"{name} {min(v):.1f}-{max(v):.1f}"
            for name, v in (("copy", self.copy_gb_s), ("triad", self.triad_gb_s))
        )
        return (
            f"{self.best_gb_s:.1f} GB/s measured {when} ({spread} GB/s over {len(self.copy_gb_s)} repeats;"
            f" {self.threads} threads, 3 x {self.array_bytes // MIB} MiB arrays; STREAM-style, best repeat)"
        )


def array_bytes_for(cpu: CPU) -> int:
    """Per-array size: 4x the last-level cache, at least 64 MiB, at most an eighth of memory over 3 arrays."""
    size = max(MIN_ARRAY_BYTES, LLC_MULTIPLE * cpu.llc_bytes)
    if cpu.memory_bytes:
        size = min(size, int(cpu.memory_bytes * MAX_MEMORY_SHARE / 3))
    return max(MIB, size // MIB * MIB)


def _slices(n: int, parts: int) -> list[slice]:
    step = -(-n // parts)
    return [slice(i, min(n, i + step)) for i in range(0, n, step)]


def _copy(a: np.ndarray, b: np.ndarray, part: slice) -> None:
    np.copyto(a[part], b[part])


def _triad(a: np.ndarray, b: np.ndarray, c: np.ndarray, part: slice, scalar: float) -> None:
    chunk = CHUNK_BYTES // a.itemsize
    for start in range(part.start, part.stop, chunk):
        window = slice(start, min(part.stop, start + chunk))
        np.multiply(c[window], scalar, out=a[window])
        np.add(a[window], b[window], out=a[window])


def _timed(pool: ThreadPoolExecutor, job: Callable[[slice], None], parts: list[slice]) -> float:
    start = time.perf_counter_ns()
    for future in [pool.submit(job, p) for p in parts]:
        future.result()
    return max(1, time.perf_counter_ns() - start) / 1e9


def measure(cpu: CPU, *, repeats: int = REPEATS, threads: int | None = None) -> Bandwidth:
    """Run the probe now (a few seconds); DeviceError when the arrays cannot be allocated."""
    threads = threads or cpu.physical_cores
    size = array_bytes_for(cpu)
    n = size // 8
    try:
        a, b, c = np.zeros(n), np.full(n, 1.0), np.full(n, 2.0)  # written once: the pages are really there
    except MemoryError as exc:
        raise DeviceError(f"cannot allocate 3 x {size // MIB} MiB for the bandwidth probe") from exc
    parts = _slices(n, threads)
    copy, triad = [], []
    with ThreadPoolExecutor(max_workers=threads) as pool:
        for i in range(repeats + 1):
            copy_s = _timed(pool, lambda p: _copy(a, b, p), parts)
            triad_s = _timed(pool, lambda p: _triad(a, b, c, p, 3.0), parts)
            if i:  # the first round warms up
                copy.append(round(2 * size / copy_s / 1e9, 2))
                triad.append(round(3 * size / triad_s / 1e9, 2))
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return Bandwidth(tuple(copy), tuple(triad), threads, size, stamp)


def cache_path() -> Path:
    return paths.cache_dir() / "hardware" / "host-bandwidth.json"


def _load(path: Path) -> dict[str, object]:
    """The cache's machines; {} when it is missing, unreadable, corrupt or of another version."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("version") != CACHE_VERSION:
        return {}
    machines = data.get("machines")
    return machines if isinstance(machines, dict) else {}


def _entry(value: object) -> Bandwidth | None:
    """A cached entry back as a Bandwidth; None when any field is missing, mistyped or not positive."""
    if not isinstance(value, dict):
        return None
    try:
        copy = tuple(float(x) for x in value["copy_gb_s"])
        triad = tuple(float(x) for x in value["triad_gb_s"])
        result = Bandwidth(
            copy, triad, int(value["threads"]), int(value["array_bytes"]), str(value["measured_at"])
        )
    except (KeyError, TypeError, ValueError):
        return None
    ok = copy and triad and all(np.isfinite(x) and x > 0 for x in (*copy, *triad))
    return result if ok else None


def _save(path: Path, machines: dict[str, object]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"version": CACHE_VERSION, "machines": machines}, indent=1) + "\n", "utf-8")
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only cache dir costs a re-measure next time, nothing else


def host_bandwidth(
    cpu: CPU, *, remeasure: bool = False, probe: Callable[[CPU], Bandwidth] = measure
) -> tuple[Bandwidth, bool]:
    """(this machine's bandwidth, whether it came from the cache); measured and cached when not cached."""
    path = cache_path()
    machines = _load(path)
    cached = None if remeasure else _entry(machines.get(cpu.key))
    if cached is not None:
        return cached, True
    result = probe(cpu)
    _save(path, {**machines, cpu.key: asdict(result)})
    return result, False

"""`servelab doctor --burn`: a short FP16 matmul burn that finds the power a GPU draws at full compute.

It runs n×n FP16 matmuls (torch, else cupy) back to back for a fixed time on one GPU while `PowerSampler`
records power; the median power of the second half (after clocks and temperature settle) is the full-compute
power that `bound.analyse_bound` compares serving against. Without torch or cupy it returns a skipped
result with the reason — never an exception.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from statistics import median

from servelab.diagnose.findings import Finding
from servelab.diagnose.power import PowerSampler
from servelab.diagnose.probe import Probe

BURN_SIZE = 16384
BURN_SECONDS = 20.0


@dataclass(frozen=True, kw_only=True)
class BurnResult:
    status: str  # ok | skipped | failed
    reason: str = ""
    backend: str | None = None
    gpu: int = 0
    size: int = BURN_SIZE
    seconds: float = 0.0
    iterations: int = 0
    tflops: float | None = None
    power_w: float | None = None
    max_power_w: float | None = None
    power_limit_w: float | None = None
    pcie_gen_under_load: int | None = None
    pcie_width_under_load: int | None = None
    samples: int = 0


def _torch_loop(gpu: int, size: int) -> tuple[Callable[[int], None], Callable[[], None]]:
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("torch is installed but sees no CUDA GPU")
    device = torch.device("cuda", gpu)
    a = torch.randn(size, size, device=device, dtype=torch.float16)
    b = torch.randn(size, size, device=device, dtype=torch.float16)

    def run(count: int) -> None:
        for _ in range(count):
            torch.matmul(a, b)

    return run, lambda: torch.cuda.synchronize(device)


def _cupy_loop(gpu: int, size: int) -> tuple[Callable[[int], None], Callable[[], None]]:
    import cupy

    with cupy.cuda.Device(gpu):
        a = cupy.random.standard_normal((size, size), dtype=cupy.float32).astype(cupy.float16)
        b = cupy.random.standard_normal((size, size), dtype=cupy.float32).astype(cupy.float16)

    def run(count: int) -> None:
        with cupy.cuda.Device(gpu):
            for _ in range(count):
                cupy.matmul(a, b)

    return run, lambda: cupy.cuda.Device(gpu).synchronize()


BACKENDS: dict[str, Callable] = {"torch": _torch_loop, "cupy": _cupy_loop}


def find_backend(names: tuple[str, ...] = ("torch", "cupy")) -> str | None:
    """The first of `names` that imports, or None."""
    import importlib.util

    return next((name for name in names if importlib.util.find_spec(name) is not None), None)


def _timed_loop(run: Callable[[int], None], sync: Callable[[], None], seconds: float) -> tuple[int, float]:
    run(2)
    sync()
    iterations, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        run(4)
        sync()
        iterations += 4
    return iterations, time.perf_counter() - start


def _settled_power(rows: list[dict]) -> tuple[float | None, float | None]:
    watts = [r["power_w"] for r in rows if r.get("power_w") is not None]
    return (median(watts[len(watts) // 2 :]), max(watts)) if watts else (None, None)


def run_burn(
    probe: Probe,
    gpu: int = 0,
    seconds: float = BURN_SECONDS,
    size: int = BURN_SIZE,
    backends: tuple[str, ...] = tuple(BACKENDS),
    hz: float = 5.0,
) -> BurnResult:
    """Burn GPU `gpu` for `seconds` with `size`² FP16 matmuls, sampling power; skipped without torch/cupy."""
    backend = find_backend(backends)
    if backend is None:
        return BurnResult(status="skipped", reason="neither torch nor cupy is installed", gpu=gpu, size=size)
    if probe.nvml_error() is not None or gpu >= probe.gpu_count():
        return BurnResult(status="skipped", reason=f"no NVIDIA GPU {gpu} visible to NVML", gpu=gpu, size=size)
    sampler = PowerSampler(probe, hz=hz, gpus=[gpu])
    try:
        run, sync = BACKENDS[backend](gpu, size)
        sampler.start()
        iterations, elapsed = _timed_loop(run, sync, seconds)
        gen, width = probe.gpu(gpu, "pcie_gen_current"), probe.gpu(gpu, "pcie_width_current")
    except Exception as exc:  # CUDA OOM, driver errors: a failed burn is a result, not a crash
        sampler.stop()
        return BurnResult(
            status="failed", reason=f"{type(exc).__name__}: {exc}", backend=backend, gpu=gpu, size=size
        )
    rows = sampler.stop()
    power, peak = _settled_power(rows)
    limit = probe.gpu(gpu, "power_limit_mw")
    return BurnResult(
        status="ok",
        backend=backend,
        gpu=gpu,
        size=size,
        seconds=elapsed,
        iterations=iterations,
        tflops=2 * size**3 * iterations / elapsed / 1e12,
        power_w=power,
        max_power_w=peak,
        power_limit_w=None if limit is None else limit / 1000,
        pcie_gen_under_load=gen,
        pcie_width_under_load=width,
        samples=len(rows),
    )


def burn_finding(result: BurnResult) -> Finding:
    """What the burn measured (info), or why it did not run."""
    if result.status != "ok":
        return Finding(
            id=f"burn-{result.status}",
            severity="info",
            title=f"Matmul burn {result.status}: {result.reason}",
            evidence=f"backend: {result.backend or 'none'}",
            consequence="No full-compute power reference: the bandwidth-vs-power verdict cannot be made.",
            fix="pip install torch (with CUDA) or cupy, then run servelab doctor --burn on the GPU machine.",
        )
    share = (
        f" ({result.power_w / result.power_limit_w:.0%} of the {result.power_limit_w:.0f} W limit)"
        if (result.power_w and result.power_limit_w)
        else ""
    )
    return Finding(
        id="burn",
        severity="info",
        title=f"GPU{result.gpu} at full FP16 compute: {result.tflops:.1f} TFLOPS, {result.power_w or 0:.0f} W{share}",
        evidence=f"{result.backend} {result.size}×{result.size} FP16 matmul, {result.iterations} iterations in "
        f"{result.seconds:.1f} s, {result.samples} power samples, peak {result.max_power_w or 0:.0f} W",
        consequence="This is the power reference: serving that draws far less while decode runs near the "
        "bandwidth ceiling is bandwidth-bound.",
        fix="Nothing to fix; compare serving power against it (servelab bench samples power on NVIDIA GPUs).",
    )

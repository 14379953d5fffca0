"""The GPU catalog table in docs/planning.md, generated from gpus.json so the two never drift.

`python -m servelab.hardware.catalog_table` prints the table (header, one row per card, then the line naming every
figure kept without a source); tests/unit/test_hardware_gpus.py checks docs/planning.md holds it verbatim.
"""

from __future__ import annotations

from collections.abc import Iterable

from servelab.hardware.gpus import GPU, load_gpus

SHORT = {
    "memory_mib": "mem",
    "cuda_memory_mib": "cuda",
    "bandwidth_gb_s": "bw",
    "fp16_tflops": "fp16",
    "bf16_tflops": "bf16",
    "fp8_tflops": "fp8",
    "fp4_tflops": "fp4",
    "int8_tflops": "int8",
    "tdp_w": "tdp",
    "nvlink_gb_s": "link",
    "pcie_gen": "pcie",
    "pcie_lanes": "lanes",
    "compute_capability": "cc",
}
HEADER = (
    "| name | memory MiB (stated) | GB/s | BF16 TFLOPS | FP8 TFLOPS | FP4 TFLOPS | INT8 TOPS | peer link | PCIe | CC"
    " | TDP W | how it was read | sources |"
)
NONE = "—"


def _grouped(value: float | None) -> str:
    """A size or rate with thousands separators (`1,008`, `716.8`); a dash where the figure is not stated."""
    if value is None:
        return NONE
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,}"


def _rate(value: float | None) -> str:
    """A TFLOPS figure as the vendor writes it (`2250`, `362.05`)."""
    if value is None:
        return NONE
    return f"{value:.0f}" if float(value).is_integer() else str(value)


def _pcie(gpu: GPU) -> str:
    if gpu.pcie_gen is None:
        return NONE
    return f"gen{gpu.pcie_gen}" + (f" x{gpu.pcie_lanes}" if gpu.pcie_lanes else "")


def _sources(gpu: GPU) -> str:
    """`bw, bf16: URL; cc: URL`: figures grouped by the URL they were read from, groups in figure order."""
    by_url: dict[str, list[str]] = {}
    for figure, where in gpu.sources:  # sorted by figure name
        by_url.setdefault(where, []).append(SHORT[figure])
    return "; ".join(f"{', '.join(figures)}: {where}" for where, figures in by_url.items())


def row(gpu: GPU) -> str:
    cells = (
        gpu.name,
        f"{gpu.memory_mib:,} ({gpu.memory_stated}"
        + (f"; CUDA {gpu.cuda_memory_mib:,}" if gpu.cuda_memory_mib else "")
        + ")",
        _grouped(gpu.bandwidth_gb_s),
        _rate(gpu.bf16_tflops),
        _rate(gpu.fp8_tflops),
        _rate(gpu.fp4_tflops),
        _rate(gpu.int8_tflops),
        _grouped(gpu.nvlink_gb_s),
        _pcie(gpu),
        gpu.compute_capability or NONE,
        _grouped(gpu.tdp_w),
        gpu.source,
        _sources(gpu),
    )
    return "| " + " | ".join(cells) + " |"


def unsourced_line(gpus: Iterable[GPU]) -> str:
    names = [f"`{gpu.name} {figure}`" for gpu in gpus for figure in gpu.unsourced]
    return "Unsourced figures (kept from an earlier catalog, their source still to be found): " + (
        ", ".join(names) + "." if names else "none."
    )


def render_table(gpus: tuple[GPU, ...] | None = None) -> str:
    gpus = load_gpus() if gpus is None else gpus
    lines = [HEADER, "|" + "---|" * HEADER.count(" |"), *(row(g) for g in gpus), "", unsourced_line(gpus)]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(render_table(), end="")

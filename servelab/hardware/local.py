"""`--gpu auto`: the GPUs this machine has, as NVML names them, matched to the catalog.

Pure: it takes what NVML said (each card's name and total memory, read by diagnose's probe) and returns the
card to plan for. NVML's memory wins over the catalog's (it is what the driver hands out); the catalog supplies
bandwidth and tensor throughput. A card the catalog lacks is planned with NVML's memory once --bandwidth is
given; with no GPU at all the device is the CPU.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from servelab.errors import ConfigError
from servelab.hardware.gpus import CUSTOM_TFLOPS, GPU, find_gpu, with_overrides

CPU_DEVICE = "cpu"


class SeenGpu(Protocol):
    """One card as NVML reported it (diagnose.gpus.GpuInfo is one)."""

    @property
    def name(self) -> str: ...
    @property
    def memory_total_mib(self) -> int | None: ...


@dataclass(frozen=True)
class LocalDevice:
    """What `--gpu auto` resolved to: a card (None for the CPU), how many, and one line saying how."""

    device: str  # a catalog name, "custom" for a card the catalog lacks, or "cpu"
    gpu: GPU | None
    count: int
    note: str


def resolve_local(
    seen: Sequence[SeenGpu],
    *,
    nvml_error: str | None = None,
    bandwidth_gb_s: float | None = None,
    tflops: float | None = None,
) -> LocalDevice:
    """The device to plan for from NVML's cards; the smallest card when they differ (each must hold its share)."""
    if not seen:
        why = nvml_error or "no GPU found"
        return LocalDevice(CPU_DEVICE, None, 0, f"--gpu auto: NVML sees no GPU ({why}); planning for the CPU")
    card = min(seen, key=lambda g: g.memory_total_mib or 0)
    names = sorted({g.name for g in seen})
    mixed = f" (mixed cards: {', '.join(names)}; planned as the smallest)" if len(names) > 1 else ""
    try:
        known: GPU | None = find_gpu(card.name)
    except ConfigError:
        known = None
    if known is not None:
        gpu = known
        if card.memory_total_mib:
            gpu = dataclasses.replace(known, memory_mib=card.memory_total_mib)
        gpu = with_overrides(gpu, bandwidth_gb_s=bandwidth_gb_s, tflops=tflops)
        return LocalDevice(
            known.name, gpu, len(seen), f"--gpu auto: {_seen(card, len(seen))} = {known.name}{mixed}"
        )
    return _unknown(card, len(seen), mixed, bandwidth_gb_s, tflops)


def _unknown(
    card: SeenGpu, count: int, mixed: str, bandwidth_gb_s: float | None, tflops: float | None
) -> LocalDevice:
    if not card.memory_total_mib or bandwidth_gb_s is None:
        missing = " and ".join(
            flag
            for flag, absent in (
                ("--vram GiB", not card.memory_total_mib),
                ("--bandwidth GB/s", bandwidth_gb_s is None),
            )
            if absent
        )
        raise ConfigError(
            f"--gpu auto: {_seen(card, count)} is not in the GPU catalog; give {missing} to plan it, or --gpu NAME"
        )
    gpu = with_overrides(
        None, vram_gib=card.memory_total_mib / 1024, bandwidth_gb_s=bandwidth_gb_s, tflops=tflops
    )
    gpu = dataclasses.replace(gpu, label=card.name, memory_mib=card.memory_total_mib)
    compute = "" if tflops is not None else f"; no --tflops: prefill assumes {CUSTOM_TFLOPS:g} TFLOPS"
    return LocalDevice(
        "custom",
        gpu,
        count,
        f"--gpu auto: {_seen(card, count)} is not in the catalog: planned with NVML's memory and "
        f"--bandwidth {bandwidth_gb_s:g} GB/s{compute}{mixed}",
    )


def _seen(card: SeenGpu, count: int) -> str:
    memory = f", {card.memory_total_mib:,} MiB" if card.memory_total_mib else ""
    return f"{count} x {card.name}{memory}"

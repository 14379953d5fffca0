"""`GpuInfo`: what NVML says about each GPU, its catalog bandwidth, and the findings about one card at a time.

PCIe generation is read at whatever load the GPU has now: idle links downclock (gen 1 at idle is normal),
so a low generation is only reported as a hint unless it was read under load (``under_load=True``).
"""

from __future__ import annotations

from dataclasses import dataclass

from servelab.diagnose.findings import Finding
from servelab.diagnose.probe import Probe
from servelab.errors import ConfigError
from servelab.hardware.local import LocalDevice, resolve_local

MIB = 1024**2
VIRTUALIZATION_MODES = {0: "none", 1: "passthrough", 2: "vgpu", 3: "host_vgpu", 4: "host_vsga"}


@dataclass(frozen=True, kw_only=True)
class GpuInfo:
    index: int
    name: str
    uuid: str | None = None
    bus_id: str | None = None
    memory_total_mib: int | None = None
    driver_version: str | None = None
    cuda_version: str | None = None
    power_limit_w: float | None = None
    power_default_limit_w: float | None = None
    sm_clock_mhz: int | None = None
    mem_clock_mhz: int | None = None
    max_sm_clock_mhz: int | None = None
    max_mem_clock_mhz: int | None = None
    pcie_gen_current: int | None = None
    pcie_gen_max: int | None = None
    pcie_width_current: int | None = None
    pcie_width_max: int | None = None
    virtualization_mode: str | None = None
    nvlink_active_links: int | None = None
    bandwidth_gb_s: float | None = None
    catalog_name: str | None = None


def _watts(milliwatts: int | None) -> float | None:
    return None if milliwatts is None else milliwatts / 1000


def _catalog(name: str) -> tuple[str | None, float | None]:
    """The GPU catalog's name and bandwidth for an NVML name; (None, None) when unknown or absent."""
    try:
        from servelab.hardware.gpus import find_gpu
    except ImportError:
        return None, None
    try:
        gpu = find_gpu(name)
    except ConfigError:
        return None, None
    return gpu.name, gpu.bandwidth_gb_s


def read_gpu(probe: Probe, index: int) -> GpuInfo:
    """One GPU's facts, each None where the driver cannot tell."""

    def q(query: str):
        return probe.gpu(index, query)

    name = q("name") or f"GPU {index}"
    catalog_name, bandwidth = _catalog(name)
    memory = q("memory_total_bytes")
    return GpuInfo(
        index=index,
        name=name,
        uuid=q("uuid"),
        bus_id=q("bus_id"),
        memory_total_mib=None if memory is None else memory // MIB,
        driver_version=q("driver_version"),
        cuda_version=q("cuda_driver_version"),
        power_limit_w=_watts(q("power_limit_mw")),
        power_default_limit_w=_watts(q("power_default_limit_mw")),
        sm_clock_mhz=q("sm_clock_mhz"),
        mem_clock_mhz=q("mem_clock_mhz"),
        max_sm_clock_mhz=q("max_sm_clock_mhz"),
        max_mem_clock_mhz=q("max_mem_clock_mhz"),
        pcie_gen_current=q("pcie_gen_current"),
        pcie_gen_max=q("pcie_gen_max"),
        pcie_width_current=q("pcie_width_current"),
        pcie_width_max=q("pcie_width_max"),
        virtualization_mode=VIRTUALIZATION_MODES.get(q("virtualization_mode")),
        nvlink_active_links=q("nvlink_active_links"),
        bandwidth_gb_s=bandwidth,
        catalog_name=catalog_name,
    )


def read_gpus(probe: Probe) -> list[GpuInfo]:
    """Every GPU NVML sees, in NVML (PCI bus) order; [] when NVML is unavailable."""
    if probe.nvml_error() is not None:
        return []
    return [read_gpu(probe, index) for index in range(probe.gpu_count())]


def local_device(
    probe: Probe, *, bandwidth_gb_s: float | None = None, tflops: float | None = None
) -> LocalDevice:
    """`plan --gpu auto`: the cards NVML sees here, resolved against the catalog (the CPU when none)."""
    return resolve_local(
        read_gpus(probe), nvml_error=probe.nvml_error(), bandwidth_gb_s=bandwidth_gb_s, tflops=tflops
    )


def no_gpu_finding(reason: str) -> Finding:
    return Finding(
        id="no-gpu",
        severity="info",
        title="No NVIDIA GPU is visible: GPU, pair and power checks were skipped",
        evidence=f"NVML: {reason}",
        consequence="Only the virtualisation, environment and file checks ran.",
        fix="On a GPU machine install the NVIDIA driver (nvidia-smi must work); in a container pass the GPUs "
        "through (docker run --gpus all, or the NVIDIA container toolkit).",
    )


def _pcie_width(gpu: GpuInfo) -> Finding | None:
    if gpu.pcie_width_current is None or gpu.pcie_width_max is None:
        return None
    if gpu.pcie_width_current >= gpu.pcie_width_max:
        return None
    return Finding(
        id="pcie-narrow",
        severity="warning",
        title=f"GPU{gpu.index} PCIe link is x{gpu.pcie_width_current}, the card supports x{gpu.pcie_width_max}",
        evidence=f"{gpu.name}: link width x{gpu.pcie_width_current} (max x{gpu.pcie_width_max})"
        + (f", gen {gpu.pcie_gen_current} (max {gpu.pcie_gen_max})" if gpu.pcie_gen_current else ""),
        consequence="Model loading, host-staged all-reduce and CPU offload move data at a fraction of the "
        "slot's speed; tensor parallelism over PCIe suffers most.",
        fix="Move the card to a full x16 slot (check the board manual for lanes shared with M.2), or check "
        "the riser; confirm with nvidia-smi --query-gpu=pcie.link.width.current --format=csv.",
    )


def _pcie_gen(gpu: GpuInfo, under_load: bool) -> Finding | None:
    if gpu.pcie_gen_current is None or gpu.pcie_gen_max is None:
        return None
    if gpu.pcie_gen_current >= gpu.pcie_gen_max:
        return None
    when = "under load" if under_load else "at idle"
    return Finding(
        id="pcie-gen-low",
        severity="warning" if under_load else "info",
        title=f"GPU{gpu.index} PCIe link runs at gen {gpu.pcie_gen_current} {when} (max gen {gpu.pcie_gen_max})",
        evidence=f"{gpu.name}: current gen {gpu.pcie_gen_current}, max gen {gpu.pcie_gen_max} ({when})",
        consequence="Idle links downclock to save power, so this is normal at idle; under load it halves "
        "host↔GPU bandwidth per missing generation.",
        fix="Re-check under load (servelab doctor --burn reads the link during the burn); if it stays low, "
        "set the slot's PCIe generation to Auto/max in the BIOS and reseat the card or riser.",
    )


def _power_cap(gpu: GpuInfo) -> Finding | None:
    limit, default = gpu.power_limit_w, gpu.power_default_limit_w
    if limit is None or default is None or limit >= default - 0.5:
        return None
    return Finding(
        id="power-capped",
        severity="info",
        title=f"GPU{gpu.index} power limit {limit:.0f} W is below its default {default:.0f} W",
        evidence=f"{gpu.name}: enforced limit {limit:.0f} W, default {default:.0f} W",
        consequence="Compute-bound work (prefill, large batches, the burn) runs slower; single-stream decode "
        "is bandwidth-bound and barely changes.",
        fix=f"If the cap was not deliberate: sudo nvidia-smi -i {gpu.index} -pl {default:.0f}.",
    )


def gpu_findings(gpus: list[GpuInfo], under_load: bool = False) -> list[Finding]:
    """Per-card findings: narrow or slow PCIe links and power caps."""
    checks = [
        check for gpu in gpus for check in (_pcie_width(gpu), _pcie_gen(gpu, under_load), _power_cap(gpu))
    ]
    return [finding for finding in checks if finding is not None]

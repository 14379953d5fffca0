"""`VirtInfo`: is this a virtual machine or a container? From systemd-detect-virt, DMI, cpuinfo and NVML.

A VM matters because the hypervisor usually hides GPU peer-to-peer (the guest's emulated chipset is not on
the driver's P2P list); a container only matters for shared memory between ranks.
"""

from __future__ import annotations

from dataclasses import dataclass

from servelab.diagnose.findings import Finding
from servelab.diagnose.probe import Probe

VM_TYPES = frozenset(
    [
        "qemu",
        "kvm",
        "amazon",
        "zvm",
        "vmware",
        "microsoft",
        "oracle",
        "powervm",
        "xen",
        "bochs",
        "uml",
        "parallels",
        "bhyve",
        "qnx",
        "acrn",
        "apple",
        "sre",
        "google",
    ]
)
CONTAINER_TYPES = frozenset(
    ["openvz", "lxc", "lxc-libvirt", "systemd-nspawn", "docker", "podman", "rkt", "wsl", "proot", "pouch"]
)
VM_VENDORS = (
    "qemu",
    "innotek",
    "vmware",
    "xen",
    "amazon ec2",
    "google",
    "red hat",
    "parallels",
    "bochs",
    "nutanix",
)


@dataclass(frozen=True)
class VirtInfo:
    detect_virt: str | None = None
    sys_vendor: str | None = None
    product_name: str | None = None
    cpu_hypervisor_flag: bool | None = None
    nvml_virtualization: tuple[str, ...] = ()

    @property
    def dmi_says_vm(self) -> bool:
        vendor, product = (self.sys_vendor or "").lower(), (self.product_name or "").lower()
        return any(v in vendor for v in VM_VENDORS) or (
            vendor.startswith("microsoft") and "virtual" in product
        )

    @property
    def in_vm(self) -> bool:
        passthrough = any(mode in ("passthrough", "vgpu") for mode in self.nvml_virtualization)
        return (
            self.detect_virt in VM_TYPES or self.dmi_says_vm or passthrough or bool(self.cpu_hypervisor_flag)
        )

    @property
    def in_container(self) -> bool:
        return self.detect_virt in CONTAINER_TYPES

    def evidence(self) -> str:
        parts = [
            f"systemd-detect-virt: {self.detect_virt or 'unavailable'}",
            f"DMI: {self.sys_vendor or '?'} / {self.product_name or '?'}",
            f"cpuinfo hypervisor flag: {'yes' if self.cpu_hypervisor_flag else 'no' if self.cpu_hypervisor_flag is not None else '?'}",
        ]
        if self.nvml_virtualization:
            parts.append(f"NVML virtualization mode: {', '.join(self.nvml_virtualization)}")
        return "; ".join(parts)


def _first_line(text: str | None) -> str | None:
    line = (text or "").strip().splitlines()
    return line[0].strip() if line else None


def _hypervisor_flag(cpuinfo: str | None) -> bool | None:
    if cpuinfo is None:
        return None
    flags = [line for line in cpuinfo.splitlines() if line.startswith("flags")]
    return any("hypervisor" in line.split(":", 1)[-1].split() for line in flags)


def read_virt(probe: Probe, nvml_modes: tuple[str, ...] = ()) -> VirtInfo:
    """Virtualisation evidence; `nvml_modes` are the GPUs' NVML virtualization modes, if any."""
    detected = probe.run(["systemd-detect-virt"])
    return VirtInfo(
        detect_virt=_first_line(detected.stdout) if detected is not None else None,
        sys_vendor=_first_line(probe.read_text("/sys/class/dmi/id/sys_vendor")),
        product_name=_first_line(probe.read_text("/sys/class/dmi/id/product_name")),
        cpu_hypervisor_flag=_hypervisor_flag(probe.read_text("/proc/cpuinfo")),
        nvml_virtualization=tuple(sorted({m for m in nvml_modes if m and m != "none"})),
    )


def virt_findings(virt: VirtInfo, gpu_count: int) -> list[Finding]:
    """A VM (warning with two or more GPUs, info otherwise); a container (info)."""
    findings = []
    if virt.in_vm:
        findings.append(
            Finding(
                id="virtual-machine",
                severity="warning" if gpu_count >= 2 else "info",
                title="This is a virtual machine: suspect GPU peer-to-peer first",
                evidence=virt.evidence(),
                consequence="Hypervisors hide PCIe peer-to-peer unless told otherwise, so multi-GPU tensor "
                "parallelism is staged through host memory; BAR sizes seen in the guest are not the card's.",
                fix="Prefer one GPU per model when it fits; for multi-GPU, give the GPUs a P2P clique on the host "
                "(QEMU x-nv-gpudirect-clique) and verify with nvidia-smi topo -p2p r.",
            )
        )
    if virt.in_container:
        findings.append(
            Finding(
                id="container",
                severity="info",
                title=f"Running inside a container ({virt.detect_virt})",
                evidence=virt.evidence(),
                consequence="Ranks in different containers cannot share /dev/shm: NCCL then falls back to sockets "
                "('via NET/Socket').",
                fix="Run all ranks of one server in one container, with --ipc=host or a large --shm-size.",
            )
        )
    return findings

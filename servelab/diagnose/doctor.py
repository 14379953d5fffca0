"""`run_doctor(probe) -> DoctorReport`: GPUs, GPU pairs, and ranked findings for one machine.

Everything is asked through the `Probe` (real machine or a recorded fixture); the burn and the real P2P test
are run by the caller (they need the real machine) and handed in as results.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from servelab.diagnose.burn import BurnResult, burn_finding
from servelab.diagnose.environment import environment_findings
from servelab.diagnose.findings import Finding, rank
from servelab.diagnose.gpus import GpuInfo, gpu_findings, no_gpu_finding, read_gpus
from servelab.diagnose.p2ptest import P2PTestResult, p2p_test_findings
from servelab.diagnose.pairs import PairInfo, pair_findings, read_pairs
from servelab.diagnose.probe import Probe
from servelab.diagnose.virt import VirtInfo, read_virt, virt_findings


@dataclass(frozen=True)
class DoctorReport:
    gpus: tuple[GpuInfo, ...]
    pairs: tuple[PairInfo, ...]
    findings: tuple[Finding, ...]
    virtualization: VirtInfo
    burn: BurnResult | None = None
    p2p_test: tuple[P2PTestResult, ...] = ()

    def to_json(self) -> dict:
        """The `servelab doctor --json` document: gpus, pairs (with interconnect), findings, and extras."""
        pairs = [{**dataclasses.asdict(p), "interconnect": p.interconnect} for p in self.pairs]
        doc = {
            "gpus": [dataclasses.asdict(g) for g in self.gpus],
            "pairs": pairs,
            "findings": [dataclasses.asdict(f) for f in self.findings],
            "virtualization": {
                **dataclasses.asdict(self.virtualization),
                "in_vm": self.virtualization.in_vm,
                "in_container": self.virtualization.in_container,
            },
        }
        if self.burn is not None:
            doc["burn"] = dataclasses.asdict(self.burn)
        if self.p2p_test:
            doc["p2p_test"] = [dataclasses.asdict(r) for r in self.p2p_test]
        return doc


def _under_load(gpus: list[GpuInfo], burn: BurnResult | None) -> tuple[list[GpuInfo], bool]:
    """GPUs with the PCIe link read during the burn (idle links downclock), and whether that happened."""
    if burn is None or burn.status != "ok" or burn.pcie_gen_under_load is None:
        return gpus, False
    changed = [
        dataclasses.replace(
            g,
            pcie_gen_current=burn.pcie_gen_under_load,
            pcie_width_current=burn.pcie_width_under_load or g.pcie_width_current,
        )
        if g.index == burn.gpu
        else g
        for g in gpus
    ]
    return [g for g in changed if g.index == burn.gpu], True


def _gpu_part(probe: Probe, gpus: list[GpuInfo], burn: BurnResult | None) -> list[Finding]:
    error = probe.nvml_error()
    if error is not None or not gpus:
        return [no_gpu_finding(error or "NVML found 0 GPUs")]
    loaded, under_load = _under_load(gpus, burn)
    if not under_load or burn is None:
        return gpu_findings(gpus)
    idle = [g for g in gpus if g.index != burn.gpu]
    return gpu_findings(loaded, under_load=True) + gpu_findings(idle)


def run_doctor(
    probe: Probe, *, burn: BurnResult | None = None, p2p_test: list[P2PTestResult] | None = None
) -> DoctorReport:
    """Read the machine through `probe` and rank what degrades serving on it."""
    gpus = read_gpus(probe)
    virt = read_virt(probe, tuple(g.virtualization_mode for g in gpus if g.virtualization_mode))
    pairs = read_pairs(probe, len(gpus))
    gpu_part = _gpu_part(probe, gpus, burn)
    no_gpu = [f for f in gpu_part if f.id == "no-gpu"]
    findings = (  # within one severity, causes (pairs, VM, environment) come before per-card details
        no_gpu
        + pair_findings(pairs, virt.in_vm)
        + virt_findings(virt, len(gpus))
        + environment_findings(probe, gpus, pairs)
        + [f for f in gpu_part if f.id != "no-gpu"]
        + ([burn_finding(burn)] if burn is not None else [])
        + p2p_test_findings(p2p_test or [])
    )
    return DoctorReport(
        gpus=tuple(gpus),
        pairs=tuple(pairs),
        findings=tuple(rank(findings)),
        virtualization=virt,
        burn=burn,
        p2p_test=tuple(p2p_test or ()),
    )

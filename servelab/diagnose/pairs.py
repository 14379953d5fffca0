"""`PairInfo`: how two GPUs reach each other (NVLink, PCIe peer-to-peer, or staged through host memory).

NVML answers first (P2P status read/write/NVLink, common ancestor); `nvidia-smi topo` cells fill the gaps
and add the NVLink count. `interconnect` uses the planner's names: nvlink, pcie-p2p, pcie-host-staged.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

from servelab.diagnose import topo
from servelab.diagnose.findings import Finding
from servelab.diagnose.probe import Probe

P2P_STATUS: dict[int | None, str] = {  # NVML's answer (None: no answer) -> status
    0: "ok",
    1: "chipset_not_supported",
    2: "gpu_not_supported",
    3: "topology_not_supported",
    4: "disabled_by_regkey",
    5: "not_supported",
    6: "unknown",
}
CAUSES = {
    "gpu_not_supported": "GNS: the stock driver refuses P2P on these (consumer GeForce) cards; patched open "
    "kernel modules exist but are unsupported — if you use one, keep VLLM_SKIP_P2P_CHECK=0 so engines test it.",
    "chipset_not_supported": "CNS: the driver does not trust this chipset or root complex for P2P (or this is "
    "a VM).",
    "topology_not_supported": "TNS: the GPUs sit under different CPU sockets or host bridges; pick GPUs under "
    "one switch/socket (nvidia-smi topo -m).",
    "disabled_by_regkey": "DR: P2P is disabled by a driver registry key (NVreg_RegistryDwords); remove it.",
}
ANCESTOR: dict[int | None, str] = {0: "INTERNAL", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}


@dataclass(frozen=True, kw_only=True)
class PairInfo:
    gpu_a: int
    gpu_b: int
    p2p_read: str | None = None
    p2p_write: str | None = None
    p2p_nvlink: str | None = None
    common_ancestor: str | None = None
    nvlink_links: int | None = None
    topo_link: str | None = None
    topo_p2p_read: str | None = None

    @property
    def label(self) -> str:
        return f"GPU{self.gpu_a}↔GPU{self.gpu_b}"

    @property
    def interconnect(self) -> str | None:
        """nvlink, pcie-p2p, pcie-host-staged, or None when neither NVML nor nvidia-smi could tell."""
        if self.nvlink_links or self.p2p_nvlink == "ok":
            return "nvlink"
        if self.p2p_read is None and self.p2p_write is None:
            return None
        if self.p2p_read == "ok" and self.p2p_write in ("ok", None):
            return "pcie-p2p"
        return "pcie-host-staged"


def _pair(probe: Probe, a: int, b: int, links: dict, p2p: dict) -> PairInfo:
    link_cell, p2p_cell = links.get((a, b)), p2p.get((a, b))
    read = P2P_STATUS.get(probe.pair(a, b, "p2p_read")) or topo.p2p_status(p2p_cell)
    return PairInfo(
        gpu_a=a,
        gpu_b=b,
        p2p_read=read,
        p2p_write=P2P_STATUS.get(probe.pair(a, b, "p2p_write")),
        p2p_nvlink=P2P_STATUS.get(probe.pair(a, b, "p2p_nvlink")),
        common_ancestor=ANCESTOR.get(probe.pair(a, b, "common_ancestor"))
        or (link_cell if link_cell in ANCESTOR.values() else None),
        nvlink_links=topo.nvlink_count(link_cell),
        topo_link=link_cell,
        topo_p2p_read=p2p_cell,
    )


def read_pairs(probe: Probe, gpu_count: int) -> list[PairInfo]:
    """Every unordered GPU pair, NVML answers completed by `nvidia-smi topo -m` / `topo -p2p r`."""
    if gpu_count < 2:
        return []
    links, p2p = topo.read_topology(probe)
    return [_pair(probe, a, b, links, p2p) for a, b in combinations(range(gpu_count), 2)]


def _status_text(pair: PairInfo) -> str:
    parts = [f"P2P read {pair.p2p_read}", f"write {pair.p2p_write}"]
    if pair.common_ancestor:
        parts.append(f"path {pair.common_ancestor}")
    if pair.topo_p2p_read:
        parts.append(f"nvidia-smi topo -p2p r: {pair.topo_p2p_read}")
    return f"{pair.label}: " + ", ".join(parts)


def _blocked(pairs: list[PairInfo], in_vm: bool) -> Finding | None:
    blocked = [p for p in pairs if p.interconnect == "pcie-host-staged"]
    if not blocked:
        return None
    vm_fix = (
        "Inside a VM the guest's emulated chipset is not on the driver's P2P list (CNS). Give every GPU the "
        "same P2P clique on the host (QEMU: -set device.hostpciN.x-nv-gpudirect-clique=0; no hidden=1/kvm=off), "
        "reboot the guest and check nvidia-smi topo -p2p r shows OK; then validate with a real request. "
    )
    statuses = {p.p2p_read for p in blocked if p.p2p_read is not None}
    causes = "".join(CAUSES[s] + " " for s in sorted(statuses) if s in CAUSES and not in_vm)
    return Finding(
        id="p2p-blocked",
        severity="critical" if in_vm else "warning",
        title=f"Peer-to-peer is blocked between {len(blocked)} GPU pair(s): tensor parallelism goes through host memory",
        evidence="; ".join(_status_text(p) for p in blocked),
        consequence="Every tensor-parallel all-reduce is staged through host RAM (NCCL 'via SHM'); vLLM and "
        "sglang log 'Custom allreduce is disabled because your platform lacks GPU P2P capability or P2P test "
        "failed'. Two cards can decode slower than one.",
        fix=(vm_fix if in_vm else causes)
        + "If the model fits one GPU, serve it on one (servelab plan … --gpus 1); otherwise prefer "
        "pipeline parallelism or NVLink-bridged pairs.",
    )


def _nvlink(pairs: list[PairInfo]) -> list[Finding]:
    linked = [p for p in pairs if p.interconnect == "nvlink"]
    findings = []
    broken = [p for p in linked if p.nvlink_links and p.p2p_nvlink not in ("ok", None)]
    if broken:
        findings.append(
            Finding(
                id="nvlink-p2p-off",
                severity="critical",
                title="NVLink is wired but the driver reports NVLink P2P unusable",
                evidence="; ".join(
                    f"{p.label}: NV{p.nvlink_links}, NVML NVLink P2P {p.p2p_nvlink}" for p in broken
                ),
                consequence="NCCL refuses to start ('P2P is disabled between NVLINK connected GPUs') or falls back "
                "to PCIe/host memory.",
                fix="Check nvidia-smi nvlink --status and the bridge seating; reboot; with fabric-managed systems "
                "check nvidia-fabricmanager is running.",
            )
        )
    if linked:
        findings.append(
            Finding(
                id="nvlink",
                severity="info",
                title=f"NVLink connects {len(linked)} GPU pair(s)",
                evidence="; ".join(
                    f"{p.label}: {p.topo_link or 'NVLink'} (NVML NVLink P2P {p.p2p_nvlink}, P2P read {p.p2p_read})"
                    for p in linked
                ),
                consequence="Tensor parallelism over these pairs uses NVLink, the fastest path.",
                fix="Keep each tensor-parallel group inside NVLink-connected GPUs (CUDA_VISIBLE_DEVICES).",
            )
        )
    return findings


def pair_findings(pairs: list[PairInfo], in_vm: bool) -> list[Finding]:
    """P2P blocked (critical under a VM, where it is fixable), NVLink present or broken."""
    blocked = _blocked(pairs, in_vm)
    return ([blocked] if blocked else []) + _nvlink(pairs)

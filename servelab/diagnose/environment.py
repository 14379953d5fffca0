"""Environment variables and files that quietly degrade multi-GPU serving, each turned into a finding.

NCCL reads a variable from the environment first, then ``~/.nccl.conf``, then ``/etc/nccl.conf``; doctor
merges them the same way and names the source. Severity depends on the machine: ``NCCL_P2P_DISABLE=1`` is
critical where two GPUs could talk peer-to-peer, a warning on other multi-GPU hosts, a note on one GPU.
Facts: docs/reference/diagnostics.md §2 (NCCL env, engines' switches, CUDA_VISIBLE_DEVICES order).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from servelab.diagnose.findings import Finding
from servelab.diagnose.gpus import GpuInfo
from servelab.diagnose.pairs import PairInfo
from servelab.diagnose.probe import Probe
from servelab.engines import registry
from servelab.engines.base import Environment

NCCL_LEVELS = ("LOC", "NVL", "PIX", "PXB", "PHB", "SYS")
LEGACY_LEVELS = {"0": "LOC", "1": "PIX", "2": "PXB", "3": "PHB", "4": "SYS", "5": "SYS"}
PATH_RANK = {"INTERNAL": 2, "PIX": 2, "PXB": 3, "PHB": 4, "NODE": 5, "SYS": 5}  # index into NCCL_LEVELS
TRUE = ("1", "true", "yes", "on")
NCCL_TUNING = (
    "NCCL_NVLS_ENABLE",
    "NCCL_CUMEM_ENABLE",
    "NCCL_ALGO",
    "NCCL_PROTO",
    "NCCL_MAX_NCHANNELS",
    "NCCL_MIN_NCHANNELS",
    "NCCL_NET",
    "NCCL_SOCKET_IFNAME",
    "NCCL_IGNORE_DISABLED_P2P",
)
# Engines whose environment switches and P2P cache files doctor checks (each engine's knowledge in its package).


def engine_environments() -> tuple[Environment, ...]:
    """The environment knowledge of every engine that has some, in registry order."""
    return tuple(e.environment for e in registry.engines() if e.environment is not None)


def engine_switches() -> dict[str, Any]:
    """Every engine's degrading switches by variable name."""
    return {name: value for e in engine_environments() for name, value in e.ENV_SWITCHES.items()}


@dataclass(frozen=True)
class EnvSetting:
    name: str
    value: str
    source: str  # "environment", "~/.nccl.conf" path, "/etc/nccl.conf"

    def __str__(self) -> str:
        return f"{self.name}={self.value} (from {self.source})"


def parse_nccl_conf(text: str) -> dict[str, str]:
    """KEY=VALUE lines of an nccl.conf; comments and blank lines ignored."""
    values = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if "=" in line:
            key, value = line.split("=", 1)
            values[key.strip()] = value.strip().strip("\"'")
    return values


def _home(env: Mapping[str, str]) -> str:
    return env.get("HOME") or "~"


def nccl_settings(probe: Probe) -> dict[str, EnvSetting]:
    """NCCL_* settings with NCCL's precedence: environment > ~/.nccl.conf > /etc/nccl.conf."""
    env = probe.environ()
    merged: dict[str, EnvSetting] = {}
    user_conf = f"{_home(env)}/.nccl.conf"
    for path in ("/etc/nccl.conf", user_conf):
        for key, value in parse_nccl_conf(probe.read_text(path) or "").items():
            merged[key] = EnvSetting(key, value, path)
    for key, value in env.items():
        if key.startswith("NCCL_"):
            merged[key] = EnvSetting(key, value, "environment")
    return merged


def _finding(id: str, severity: str, title: str, evidence: str, consequence: str, fix: str) -> Finding:
    return Finding(id=id, severity=severity, title=title, evidence=evidence, consequence=consequence, fix=fix)


def _p2p_capable(pairs: list[PairInfo]) -> list[PairInfo]:
    return [p for p in pairs if p.interconnect in ("nvlink", "pcie-p2p")]


def _p2p_disable(setting: EnvSetting, gpu_count: int, pairs: list[PairInfo]) -> Finding:
    capable = _p2p_capable(pairs)
    severity = "critical" if capable else "warning" if gpu_count >= 2 else "info"
    lost = f" ({', '.join(p.label + ' ' + str(p.interconnect) for p in capable)} unused)" if capable else ""
    return _finding(
        "env-nccl-p2p-disable",
        severity,
        f"NCCL peer-to-peer is switched off{lost}",
        str(setting),
        "NCCL moves every all-reduce through host shared memory (or sockets) instead of NVLink/PCIe P2P; "
        "NCCL logs 'NCCL_P2P_DISABLE set by environment to 1'.",
        f"Remove it: unset NCCL_P2P_DISABLE{'' if setting.source == 'environment' else ' and delete the line in ' + setting.source}.",
    )


def _level(value: str) -> str | None:
    level = LEGACY_LEVELS.get(value.strip(), value.strip().upper())
    return level if level in NCCL_LEVELS or level == "DIS" else None


def _p2p_level(setting: EnvSetting, pairs: list[PairInfo]) -> Finding:
    level = _level(setting.value)
    if level is None:
        return _finding(
            "env-nccl-p2p-level",
            "warning",
            f"NCCL_P2P_LEVEL={setting.value} is not a level NCCL knows",
            str(setting),
            "NCCL ignores or rejects it.",
            f"Use one of {', '.join(NCCL_LEVELS)} or unset it.",
        )
    cut = len(NCCL_LEVELS) if level == "SYS" else NCCL_LEVELS.index(level) if level != "DIS" else 0
    refused = [
        p
        for p in _p2p_capable(pairs)
        if p.interconnect != "nvlink" and PATH_RANK.get(p.common_ancestor or "", 9) > cut
    ]
    if level in ("LOC", "DIS") or refused:
        where = ", ".join(f"{p.label} ({p.common_ancestor})" for p in refused) or "every GPU pair"
        return _finding(
            "env-nccl-p2p-level",
            "warning",
            f"NCCL_P2P_LEVEL={setting.value} keeps NCCL off P2P for {where}",
            str(setting),
            "Those pairs are staged through host memory although P2P works on them.",
            "Raise it to the pairs' path (e.g. NCCL_P2P_LEVEL=PHB or SYS) or unset it.",
        )
    return _finding(
        "env-nccl-p2p-level",
        "info",
        f"NCCL_P2P_LEVEL={setting.value} is set",
        str(setting),
        "NCCL uses P2P only on paths up to this level.",
        "Nothing to do unless multi-GPU runs are slow.",
    )


def _default_level(pairs: list[PairInfo]) -> Finding | None:
    far = [
        p for p in pairs if p.interconnect == "pcie-p2p" and PATH_RANK.get(p.common_ancestor or "", 0) >= 4
    ]
    if not far:
        return None
    return _finding(
        "nccl-p2p-level-default",
        "info",
        "P2P works across the CPU host bridge, but NCCL's default level stops short of it",
        "; ".join(f"{p.label}: P2P {p.p2p_read}, path {p.common_ancestor}" for p in far),
        "NCCL's default NCCL_P2P_LEVEL is PXB (SYS on AMD CPUs with two GPUs), so on Intel hosts these pairs use "
        "shared memory ('via SHM') even though P2P is available.",
        "Measure both: NCCL_P2P_LEVEL=PHB (or SYS) against the default, with the engine you serve.",
    )


def _shm_disable(setting: EnvSetting, gpu_count: int, pairs: list[PairInfo]) -> Finding:
    staged = [p for p in pairs if p.interconnect == "pcie-host-staged"]
    return _finding(
        "env-nccl-shm-disable",
        "warning" if staged else "info",
        "NCCL shared-memory transport is switched off",
        str(setting),
        "Where P2P is unavailable NCCL falls back to sockets on loopback ('via NET/Socket'), the "
        "slowest path" + (f" — this affects {', '.join(p.label for p in staged)}." if staged else "."),
        "Unset NCCL_SHM_DISABLE; in containers give ranks a shared /dev/shm (--ipc=host) instead.",
    )


def nccl_findings(settings: dict[str, EnvSetting], gpu_count: int, pairs: list[PairInfo]) -> list[Finding]:
    """Findings for the NCCL variables that are set (or for the default level where it bites)."""
    findings = []
    if (s := settings.get("NCCL_P2P_DISABLE")) and s.value.strip().lower() in TRUE:
        findings.append(_p2p_disable(s, gpu_count, pairs))
    if s := settings.get("NCCL_P2P_LEVEL"):
        findings.append(_p2p_level(s, pairs))
    elif default := _default_level(pairs):
        findings.append(default)
    if (s := settings.get("NCCL_SHM_DISABLE")) and s.value.strip().lower() in TRUE:
        findings.append(_shm_disable(s, gpu_count, pairs))
    if (s := settings.get("NCCL_IB_DISABLE")) and s.value.strip().lower() in TRUE:
        findings.append(
            _finding(
                "env-nccl-ib-disable",
                "info",
                "NCCL InfiniBand is switched off",
                str(s),
                "Only multi-node runs are affected: they fall back to TCP sockets.",
                "Unset NCCL_IB_DISABLE if you serve across nodes over InfiniBand/RoCE.",
            )
        )
    tuned = [settings[name] for name in NCCL_TUNING if name in settings]
    if tuned:
        findings.append(
            _finding(
                "env-nccl-overrides",
                "info",
                "NCCL tuning variables override its defaults",
                "; ".join(map(str, tuned)),
                "NCCL's own topology-based choices are replaced.",
                "Keep them only if a measurement showed they help.",
            )
        )
    return findings


def _visible_devices(env: Mapping[str, str], gpus: list[GpuInfo]) -> list[Finding]:
    value = env.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return []
    shown = f"CUDA_VISIBLE_DEVICES={value!r}"
    entries = [e.strip() for e in value.split(",") if e.strip()]
    if not entries:
        return [
            _finding(
                "env-cuda-visible-empty",
                "warning",
                "CUDA_VISIBLE_DEVICES hides every GPU",
                shown,
                "CUDA programs (every engine) see no GPU and fail or run on the CPU.",
                "Unset it or list the GPUs to use (e.g. 0,1).",
            )
        ]
    findings = []
    indexes = [int(e) for e in entries if e.isdigit()]
    if gpus and any(i >= len(gpus) for i in indexes):
        findings.append(
            _finding(
                "env-cuda-visible-range",
                "warning",
                "CUDA_VISIBLE_DEVICES names a GPU that does not exist",
                f"{shown}; NVML sees {len(gpus)} GPU(s)",
                "CUDA ignores the list from the bad entry on.",
                f"Use indexes 0–{len(gpus) - 1}.",
            )
        )
    if len(indexes) < len(entries):
        findings.append(
            _finding(
                "env-cuda-visible-uuid",
                "info",
                "CUDA_VISIBLE_DEVICES uses UUIDs or MIG names",
                shown,
                "Older vLLM/sglang code parses it with int() to map ranks to NVML GPUs and fails.",
                "Use numeric indexes with CUDA_DEVICE_ORDER=PCI_BUS_ID if an engine complains.",
            )
        )
    order = env.get("CUDA_DEVICE_ORDER", "FASTEST_FIRST")
    if len(entries) >= 2 and order != "PCI_BUS_ID":
        mixed = len({g.name for g in gpus}) > 1
        findings.append(
            _finding(
                "env-cuda-device-order",
                "warning" if mixed else "info",
                "CUDA_VISIBLE_DEVICES is read in CUDA's order, not nvidia-smi's (CUDA_DEVICE_ORDER is not PCI_BUS_ID)",
                f"{shown}; CUDA_DEVICE_ORDER={order}"
                + ("; GPUs differ: " + ", ".join(g.name for g in gpus) if mixed else ""),
                "CUDA numbers the fastest GPU first, NVML and nvidia-smi by PCI bus: engines then check NVLink/P2P on "
                "the wrong physical GPUs and you may put the TP group on other cards than intended.",
                "export CUDA_DEVICE_ORDER=PCI_BUS_ID",
            )
        )
    return findings


def _engine_switches(env: Mapping[str, str]) -> list[Finding]:
    findings = []
    for name, (active, meaning) in engine_switches().items():
        if env.get(name, "").strip().lower() in ((active,) if active == "0" else TRUE):
            findings.append(
                _finding(
                    f"env-{name.lower().replace('_', '-')}",
                    "info",
                    f"{name}={env[name]} is set",
                    f"{name}={env[name]} (environment)",
                    f"Meaning: {meaning}.",
                    f"Unset {name} unless you set it on purpose.",
                )
            )
    return findings


def _cache_globs(env: Mapping[str, str]) -> list[str]:
    cache_home = env.get("XDG_CACHE_HOME") or f"{_home(env)}/.cache"
    return [engine.p2p_cache_glob(env, cache_home) for engine in engine_environments()]


def _cache_finding(path: str, text: str | None, pairs: list[PairInfo]) -> Finding:
    try:
        entries = json.loads(text or "")
        denied = sorted(k for k, v in entries.items() if v is False)
    except (ValueError, AttributeError):
        return _finding(
            "stale-p2p-cache",
            "warning",
            "An engine's GPU P2P cache file is unreadable",
            path,
            "The engine may fail or skip its P2P test.",
            f"Delete it: rm {path}",
        )
    staged = [p for p in pairs if p.interconnect == "pcie-host-staged"]
    if denied:
        return _finding(
            "stale-p2p-cache",
            "warning",
            f"A cached P2P test says no for {', '.join(denied)}",
            path,
            "vLLM/sglang reuse this file and keep custom all-reduce off without testing again, even "
            "after P2P is fixed (new driver, BIOS, clique).",
            f"Delete it to force a fresh test: rm {path}",
        )
    if staged and entries:
        return _finding(
            "stale-p2p-cache",
            "warning",
            "A cached P2P test says yes, but the driver now reports P2P blocked",
            f"{path}; " + "; ".join(p.label for p in staged),
            "The engine may enable custom all-reduce on a path that no longer works (hangs or garbage).",
            f"Delete it: rm {path}",
        )
    return _finding(
        "p2p-cache",
        "info",
        "An engine's GPU P2P cache records working P2P",
        path,
        "The engine skips its P2P test and trusts this file.",
        f"Delete it after hardware or driver changes: rm {path}",
    )


def cache_findings(probe: Probe, pairs: list[PairInfo]) -> list[Finding]:
    """Stale ``gpu_p2p_access_cache_for_*.json`` files under the vLLM and sglang cache directories."""
    paths = [path for pattern in _cache_globs(probe.environ()) for path in probe.glob(pattern)]
    return [_cache_finding(path, probe.read_text(path), pairs) for path in paths]


def environment_findings(probe: Probe, gpus: list[GpuInfo], pairs: list[PairInfo]) -> list[Finding]:
    """NCCL settings (env and nccl.conf files), CUDA_VISIBLE_DEVICES, engine switches, stale P2P caches."""
    env = probe.environ()
    return (
        nccl_findings(nccl_settings(probe), len(gpus), pairs)
        + _visible_devices(env, gpus)
        + _engine_switches(env)
        + cache_findings(probe, pairs)
    )

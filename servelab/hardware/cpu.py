"""The CPU as a device: what the OS says about this machine's processor and memory, and its estimated peak.

Read from Linux's own files (`/proc/cpuinfo`, `/proc/meminfo`, `/sys/devices/system/{cpu,node}`) and
`os.sched_getaffinity`: model name, physical cores and logical CPUs this process may use, vector units
(AVX2 / AVX-512 / AVX512-BF16 / AMX flags), the last-level cache, host memory and the memory of the NUMA
node the first usable CPU sits on (vLLM's CPU backend sizes itself from that node).

Peak FLOP/s is an estimate, cores x frequency x FLOPs per cycle per core, with these assumptions
(docs/planning.md "The CPU as a device"):
- FLOPs per cycle = 2 (a fused multiply-add) x 2 FMA pipes x the fp32 lanes of the widest vector unit:
  32 for AVX2 (256 bit); 64 for AVX-512 on Intel (two 512-bit pipes); 32 for AVX-512 on AMD Zen 4, which
  runs 512-bit operations on 256-bit datapaths; 16 for NEON/ASIMD (128 bit); 8 with none of them.
- BF16 doubles the fp32 rate with AVX512_BF16 (two bf16 products per fp32 lane); AMX-BF16 gives 1024 BF16
  FLOPs per cycle per core (Intel's figure for one AMX tile unit); without either, bf16 runs at the fp32 rate.
- the frequency is cpufreq's cpuinfo_max_freq when the kernel exposes it, else /proc/cpuinfo's "cpu MHz"
  (the clock at the moment of reading); SMT siblings share one core's pipes, so only physical cores count.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

KIB = 1024
VECTOR_FLAGS = ("avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni", "amx_tile", "amx_bf16", "amx_int8")


@dataclass(frozen=True, kw_only=True)
class CPU:
    model: str
    vendor: str
    physical_cores: int  # distinct (package, core) pairs among the CPUs this process may use
    logical_cpus: int  # len(os.sched_getaffinity(0))
    flags: tuple[str, ...]  # the VECTOR_FLAGS (and asimd) the CPU reports
    frequency_mhz: float
    frequency_source: str
    memory_bytes: int  # MemTotal
    numa_nodes: int
    numa_node_memory_bytes: int  # MemTotal of the node of the first usable CPU (= memory_bytes without NUMA)
    llc_bytes: int  # the largest cache level (0 when the kernel does not say)

    @property
    def vector_unit(self) -> str:
        """The widest vector unit: "avx512", "avx2", "neon" or "scalar"."""
        if "avx512f" in self.flags:
            return "avx512"
        if "avx2" in self.flags:
            return "avx2"
        return "neon" if "asimd" in self.flags else "scalar"

    @property
    def key(self) -> str:
        """What identifies this machine's memory system for the bandwidth cache."""
        return f"{self.model}|{self.memory_bytes}|{self.physical_cores}c{self.logical_cpus}t"


@dataclass(frozen=True)
class PeakFlops:
    fp32_flops: float
    bf16_flops: float
    fp32_per_cycle: int  # per core
    bf16_per_cycle: int
    how: str  # the arithmetic and its assumptions, one line


def peak_flops(cpu: CPU) -> PeakFlops:
    """Estimated peak FLOP/s of the usable physical cores (module docstring: the assumptions)."""
    lanes = {"avx512": 16, "avx2": 8, "neon": 4, "scalar": 2}[cpu.vector_unit]
    if cpu.vector_unit == "avx512" and cpu.vendor == "AuthenticAMD":
        lanes = 8  # Zen 4: 512-bit operations on 256-bit datapaths
    fp32 = 2 * 2 * lanes
    bf16 = 1024 if "amx_bf16" in cpu.flags else (2 * fp32 if "avx512_bf16" in cpu.flags else fp32)
    hz = cpu.frequency_mhz * 1e6
    unit = "AMX-BF16" if "amx_bf16" in cpu.flags else ("AVX512_BF16" if bf16 > fp32 else cpu.vector_unit)
    how = (
        f"{cpu.physical_cores} cores x {cpu.frequency_mhz / 1000:.2f} GHz ({cpu.frequency_source}) x"
        f" {fp32} fp32 / {bf16} bf16 FLOP/cycle ({cpu.vector_unit}, 2 FMA pipes; bf16 via {unit})"
    )
    return PeakFlops(cpu.physical_cores * hz * fp32, cpu.physical_cores * hz * bf16, fp32, bf16, how)


def parse_cpuinfo(text: str) -> tuple[str, str, dict[int, tuple[str, str]], tuple[str, ...], float]:
    """(model name, vendor, {processor: (physical id, core id)}, flags, cpu MHz) from /proc/cpuinfo."""
    model = vendor = ""
    cores: dict[int, tuple[str, str]] = {}
    flags: set[str] = set()
    mhz = 0.0
    for block in text.split("\n\n"):
        fields = dict(_field(line) for line in block.splitlines() if ":" in line)
        if "processor" not in fields or not fields["processor"].isdigit():
            continue
        model = model or fields.get("model name", "") or fields.get("Model", "")
        vendor = vendor or fields.get("vendor_id", "") or fields.get("CPU implementer", "")
        cores[int(fields["processor"])] = (
            fields.get("physical id", "0"),
            fields.get("core id", fields["processor"]),
        )
        flags |= set((fields.get("flags") or fields.get("Features") or "").split())
        mhz = mhz or _float(fields.get("cpu MHz", ""))
    wanted = tuple(f for f in (*VECTOR_FLAGS, "asimd") if f in flags)
    return model or "unknown CPU", vendor, cores, wanted, mhz


def _field(line: str) -> tuple[str, str]:
    key, _, value = line.partition(":")
    return key.strip(), value.strip()


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return 0.0


def parse_meminfo(text: str) -> int:
    """MemTotal in bytes from /proc/meminfo or a node's meminfo ("Node 0 MemTotal: N kB"); 0 when absent."""
    match = re.search(r"MemTotal:\s+(\d+)\s*kB", text)
    return int(match.group(1)) * KIB if match else 0


def parse_cache_size(text: str) -> int:
    """A sysfs cache size ("32768K", "1M") in bytes; 0 when unreadable."""
    match = re.fullmatch(r"\s*(\d+)\s*([KMG]?)\s*", text)
    if not match:
        return 0
    return int(match.group(1)) * {"": 1, "K": KIB, "M": KIB**2, "G": KIB**3}[match.group(2)]


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _llc_bytes(sys_cpu: Path, cpu: int) -> int:
    sizes = [parse_cache_size(_read(p / "size")) for p in (sys_cpu / f"cpu{cpu}" / "cache").glob("index*")]
    return max(sizes, default=0)


def _numa(sys_node: Path, cpu: int) -> tuple[int, int]:
    """(number of NUMA nodes, MemTotal of the node holding `cpu`) from sysfs; (0, 0) without NUMA info."""
    nodes = sorted(sys_node.glob("node[0-9]*"))
    for node in nodes:
        if (node / f"cpu{cpu}").exists():
            return len(nodes), parse_meminfo(_read(node / "meminfo"))
    return len(nodes), parse_meminfo(_read(nodes[0] / "meminfo")) if nodes else 0


def _frequency(sys_cpu: Path, cpu: int, cpuinfo_mhz: float) -> tuple[float, str]:
    khz = _float(_read(sys_cpu / f"cpu{cpu}" / "cpufreq" / "cpuinfo_max_freq").strip())
    if khz > 0:
        return khz / 1000, "cpufreq max"
    return (
        (cpuinfo_mhz, "/proc/cpuinfo cpu MHz, current")
        if cpuinfo_mhz > 0
        else (1000.0, "unknown; 1 GHz assumed")
    )


def read_cpu(root: Path = Path("/"), allowed: set[int] | None = None) -> CPU:
    """This machine's CPU and memory from the files under `root` (a copy of /proc and /sys in tests)."""
    model, vendor, cores, flags, mhz = parse_cpuinfo(_read(root / "proc" / "cpuinfo"))
    usable = sorted(allowed if allowed is not None else os.sched_getaffinity(0))
    first = usable[0] if usable else 0
    sys_cpu, sys_node = (
        root / "sys" / "devices" / "system" / "cpu",
        root / "sys" / "devices" / "system" / "node",
    )
    physical = {cores.get(c, ("0", str(c))) for c in usable}
    memory = parse_meminfo(_read(root / "proc" / "meminfo"))
    nodes, node_memory = _numa(sys_node, first)
    frequency, source = _frequency(sys_cpu, first, mhz)
    return CPU(
        model=model,
        vendor=vendor,
        physical_cores=max(1, len(physical)),
        logical_cpus=max(1, len(usable)),
        flags=flags,
        frequency_mhz=frequency,
        frequency_source=source,
        memory_bytes=memory,
        numa_nodes=max(1, nodes),
        numa_node_memory_bytes=node_memory or memory,
        llc_bytes=_llc_bytes(sys_cpu, first),
    )

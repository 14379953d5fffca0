"""The CPU device's description: /proc and /sys readers, the peak-FLOP/s estimate (pure, exact values).

The cpuinfo excerpts are shaped as Linux prints them (an AMD EPYC with AVX-512 as on this project's machine,
an Intel Xeon with AMX, an Arm Neoverse); read_cpu also reads this machine's own files.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from servelab.hardware.cpu import (
    CPU,
    VECTOR_FLAGS,
    parse_cache_size,
    parse_cpuinfo,
    parse_meminfo,
    peak_flops,
    read_cpu,
)

AMD = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC
physical id\t: 0
core id\t\t: 0
cpu MHz\t\t: 2596.144
flags\t\t: fpu sse2 avx fma avx2 avx512f avx512_bf16 avx512_vnni

processor\t: 1
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC
physical id\t: 0
core id\t\t: 1
cpu MHz\t\t: 2596.144
flags\t\t: fpu sse2 avx fma avx2 avx512f avx512_bf16 avx512_vnni
"""

INTEL_SMT = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8480+
physical id\t: 0
core id\t\t: 0
cpu MHz\t\t: 2000.000
flags\t\t: avx2 fma avx512f avx512_bf16 amx_bf16 amx_tile amx_int8

processor\t: 1
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8480+
physical id\t: 0
core id\t\t: 0
cpu MHz\t\t: 2000.000
flags\t\t: avx2 fma avx512f avx512_bf16 amx_bf16 amx_tile amx_int8
"""


def _cpu(**kw: object) -> CPU:
    base: dict[str, object] = dict(
        model="m",
        vendor="AuthenticAMD",
        physical_cores=2,
        logical_cpus=2,
        flags=("avx2", "fma"),
        frequency_mhz=2500.0,
        frequency_source="test",
        memory_bytes=24 << 30,
        numa_nodes=1,
        numa_node_memory_bytes=24 << 30,
        llc_bytes=32 << 20,
    )
    base.update(kw)
    return CPU(**base)  # type: ignore[arg-type]


def test_cpuinfo_gives_model_cores_flags_and_clock() -> None:
    model, vendor, cores, flags, mhz = parse_cpuinfo(AMD)
    assert (model, vendor, mhz) == ("AMD EPYC", "AuthenticAMD", 2596.144)
    assert cores == {0: ("0", "0"), 1: ("0", "1")}
    assert flags == ("avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni")


def test_smt_siblings_count_as_one_physical_core(tmp_path: Path) -> None:
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "cpuinfo").write_text(INTEL_SMT)
    (tmp_path / "proc" / "meminfo").write_text("MemTotal:       24683652 kB\nMemFree: 1 kB\n")
    cpu = read_cpu(tmp_path, allowed={0, 1})
    assert (cpu.physical_cores, cpu.logical_cpus) == (1, 2)
    assert cpu.memory_bytes == cpu.numa_node_memory_bytes == 24683652 * 1024
    assert (cpu.frequency_mhz, cpu.llc_bytes) == (2000.0, 0)


def test_sysfs_numa_node_cache_and_max_frequency_are_read(tmp_path: Path) -> None:
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "cpuinfo").write_text(AMD)
    (tmp_path / "proc" / "meminfo").write_text("MemTotal:       33554432 kB\n")
    cpu_dir = tmp_path / "sys/devices/system/cpu/cpu1"
    for level, size in (("index0", "32K"), ("index2", "1024K"), ("index3", "32768K")):
        (cpu_dir / "cache" / level).mkdir(parents=True)
        (cpu_dir / "cache" / level / "size").write_text(size + "\n")
    (cpu_dir / "cpufreq").mkdir()
    (cpu_dir / "cpufreq" / "cpuinfo_max_freq").write_text("3700000\n")
    for node, kib in (("node0", 16777216), ("node1", 16777216)):
        (tmp_path / "sys/devices/system/node" / node).mkdir(parents=True)
        (tmp_path / "sys/devices/system/node" / node / "meminfo").write_text(f"Node 1 MemTotal:  {kib} kB\n")
    (tmp_path / "sys/devices/system/node/node1/cpu1").mkdir()
    cpu = read_cpu(tmp_path, allowed={1})
    assert (cpu.physical_cores, cpu.numa_nodes, cpu.numa_node_memory_bytes) == (1, 2, 16 << 30)
    assert (cpu.llc_bytes, cpu.frequency_mhz, cpu.frequency_source) == (32 << 20, 3700.0, "cpufreq max")


@pytest.mark.parametrize(
    ("text", "expected"), [("32768K", 32 << 20), ("1M\n", 1 << 20), ("512", 512), ("", 0), ("big", 0)]
)
def test_cache_sizes(text: str, expected: int) -> None:
    assert parse_cache_size(text) == expected


def test_meminfo_without_memtotal_is_zero() -> None:
    assert parse_meminfo("MemFree: 12 kB\n") == 0


def test_peak_flops_amd_avx512_runs_on_256_bit_datapaths() -> None:
    peak = peak_flops(_cpu(flags=("avx2", "fma", "avx512f", "avx512_bf16"), frequency_mhz=2500.0))
    assert (peak.fp32_per_cycle, peak.bf16_per_cycle) == (32, 64)
    assert peak.fp32_flops == 2 * 2.5e9 * 32 and peak.bf16_flops == 2 * 2.5e9 * 64
    assert "2 cores x 2.50 GHz" in peak.how


def test_peak_flops_intel_avx512_and_amx() -> None:
    avx512 = peak_flops(_cpu(vendor="GenuineIntel", flags=("avx2", "avx512f")))
    amx = peak_flops(_cpu(vendor="GenuineIntel", flags=("avx2", "avx512f", "avx512_bf16", "amx_bf16")))
    assert (avx512.fp32_per_cycle, avx512.bf16_per_cycle) == (64, 64)
    assert (amx.fp32_per_cycle, amx.bf16_per_cycle) == (64, 1024)


def test_peak_flops_avx2_neon_scalar() -> None:
    assert peak_flops(_cpu(flags=("avx2", "fma"))).fp32_per_cycle == 32
    assert peak_flops(_cpu(flags=("asimd",))).fp32_per_cycle == 16
    assert peak_flops(_cpu(flags=())).fp32_per_cycle == 8


def test_this_machine_is_read() -> None:
    cpu = read_cpu()
    assert cpu.physical_cores >= 1 and cpu.logical_cpus >= cpu.physical_cores
    assert cpu.memory_bytes > 0 and 0 < cpu.numa_node_memory_bytes <= cpu.memory_bytes
    assert set(cpu.flags) <= {*VECTOR_FLAGS, "asimd"} and cpu.frequency_mhz > 0
    assert peak_flops(cpu).bf16_flops > 0

"""This machine's CPU as the planner's device: `cpu.py`'s description and `bandwidth.py`'s measurement in
the `GPU` shape every planner takes (name "cpu", host memory, measured bandwidth, estimated peak FLOP/s).

`servelab plan MODEL --gpu cpu` (and `--gpu auto` on a machine without a GPU) reach it through
`gpus.find_gpu("cpu")`; the first call on a machine runs the probe (a few seconds) and caches it.
"""

from __future__ import annotations

from servelab.hardware.bandwidth import Bandwidth, host_bandwidth
from servelab.hardware.cpu import CPU, peak_flops, read_cpu
from servelab.hardware.gpus import CPU_DEVICE, GPU, MIB


def cpu_device(cpu: CPU, bandwidth: Bandwidth) -> GPU:
    """The device for `cpu` with `bandwidth` measured on it (pure)."""
    peak = peak_flops(cpu)
    return GPU(
        name=CPU_DEVICE,
        label=f"{cpu.model} ({cpu.physical_cores} cores, {cpu.vector_unit})",
        memory_mib=cpu.memory_bytes // MIB,
        bandwidth_gb_s=bandwidth.best_gb_s,
        bf16_tflops=peak.bf16_flops / 1e12,
        fp16_tflops=peak.fp32_flops / 1e12,  # no fp16 FMA on x86 vector units: fp16 runs as fp32
        fp8_tflops=None,
        int8_tflops=None,
        cpu=cpu,
        source=f"host memory bandwidth {bandwidth.summary}; peak estimated: {peak.how}",
    )


def this_machine(*, remeasure: bool = False) -> GPU:
    """This machine's CPU device; the bandwidth from the cache unless `remeasure` (or nothing is cached)."""
    cpu = read_cpu()
    bandwidth, _ = host_bandwidth(cpu, remeasure=remeasure)
    return cpu_device(cpu, bandwidth)

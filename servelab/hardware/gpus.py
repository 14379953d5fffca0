"""The GPU catalog: memory, bandwidth, dense tensor throughput, power and peer links, read from gpus.json.

Every figure an entry states has its source URL in the entry's `sources` (figure name -> URL); the prose
`source` says how each was read (dense vs with sparsity, measured vs stated) and docs/planning.md lists both.

Lookup is tolerant of case, spaces, dashes and vendor prefixes (`RTX 4090`, `rtx4090`, `NVIDIA GeForce
RTX 4090`); an unknown name is a ConfigError that lists the catalog. `with_overrides` applies the CLI's
--vram / --bandwidth / --tflops to a catalog entry or builds a custom card from them.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING

from servelab.errors import ConfigError
from servelab.ranges import number

if TYPE_CHECKING:
    from servelab.hardware.cpu import CPU

MIB = 1024**2
GIB = 1024**3
INTERCONNECTS = ("nvlink", "pcie-p2p", "pcie-host-staged")
# CUDA/ROCm context + driver allocations per device, outside any engine's accounting (0.3-0.6 GiB measured;
# docs/reference/memory.md §8). Unified-memory Apple GPUs have none to speak of.
RUNTIME_CONTEXT_MIB = 512
CPU_DEVICE = "cpu"  # the name that plans for this machine's CPU (hardware/host.py)
# The figures a catalog entry may state; each one it states needs a source URL (tests/unit/test_hardware_gpus.py).
FIGURES = (
    "memory_mib",
    "cuda_memory_mib",
    "bandwidth_gb_s",
    "fp16_tflops",
    "bf16_tflops",
    "fp8_tflops",
    "fp4_tflops",
    "int8_tflops",
    "tdp_w",
    "nvlink_gb_s",
    "pcie_gen",
    "pcie_lanes",
    "compute_capability",
)


@dataclass(frozen=True, kw_only=True)
class GPU:
    name: str
    label: str
    memory_mib: int
    bandwidth_gb_s: float
    bf16_tflops: float
    fp16_tflops: float | None = None
    fp8_tflops: float | None = None
    fp4_tflops: float | None = None
    int8_tflops: float | None = None
    tdp_w: float | None = None
    nvlink_gb_s: float | None = None
    pcie_gen: int | None = None
    pcie_lanes: int | None = None
    unified_memory: bool = False
    compute_capability: str | None = None  # CUDA sm version ("8.9"); None off CUDA
    aliases: tuple[str, ...] = ()
    source: str = ""
    memory_stated: str = ""  # the capacity as the vendor states it ("96 GB GDDR7")
    sources: tuple[tuple[str, str], ...] = ()  # (figure, URL) for each figure in FIGURES the entry states
    unsourced: tuple[str, ...] = ()  # figures kept from an earlier catalog whose source is still to be found
    cpu: CPU | None = None  # set on the CPU device: the host's cores, vector units, memory and NUMA node
    # the total CUDA reports (cudaMemGetInfo, torch's total_memory): nvidia-smi's total less what the driver
    # reserves; what vLLM multiplies --gpu-memory-utilization by. None: not read from a log yet (memory_mib)
    cuda_memory_mib: int | None = None

    @property
    def figure_sources(self) -> dict[str, str]:
        return dict(self.sources)

    @property
    def memory_bytes(self) -> int:
        return self.memory_mib * MIB

    @property
    def cuda_memory_bytes(self) -> int:
        """The device total as CUDA reports it, where a log has shown it; else memory_bytes."""
        return (self.cuda_memory_mib or self.memory_mib) * MIB

    @property
    def is_cpu(self) -> bool:
        return self.cpu is not None

    @property
    def is_rocm(self) -> bool:
        """An AMD card (ROCm): the catalog labels them "AMD ..." and they have no CUDA compute capability."""
        return self.compute_capability is None and self.label.startswith("AMD")

    @property
    def runtime_context_bytes(self) -> int:
        return 0 if self.unified_memory or self.is_cpu else RUNTIME_CONTEXT_MIB * MIB

    @property
    def bandwidth_bytes_s(self) -> float:
        return self.bandwidth_gb_s * 1e9

    def tensor_flops(self, compute_dtype: str) -> float:
        """Dense tensor FLOP/s for a matmul input dtype (`bf16`, `fp16`, `fp8`, `fp4`, `int8`); falls back to BF16."""
        tflops = {
            "fp16": self.fp16_tflops,
            "fp8": self.fp8_tflops,
            "fp4": self.fp4_tflops,
            "int8": self.int8_tflops,
        }.get(compute_dtype)
        return (tflops or self.bf16_tflops) * 1e12

    @property
    def pcie_gb_s(self) -> float:
        """Per-direction PCIe bandwidth (theoretical): 2 GB/s per lane at gen 4, doubling per gen; x16 unless stated."""
        gen = self.pcie_gen or 4
        return (self.pcie_lanes or 16) * 2.0 * 2 ** (gen - 4)


def _normalise(name: str) -> str:
    name = name.lower().replace("geforce", "").replace("nvidia", "")
    return re.sub(r"[^a-z0-9]", "", name)


def _from_json(row: dict) -> GPU:
    fields = {f.name for f in dataclasses.fields(GPU)}
    values = {k: v for k, v in row.items() if k in fields}
    values["aliases"] = tuple(values.get("aliases", ()))
    values["sources"] = tuple(sorted(values.get("sources", {}).items()))
    values["unsourced"] = tuple(values.get("unsourced", ()))
    return GPU(**values)


def load_gpus() -> tuple[GPU, ...]:
    """Every GPU in the bundled catalog, in catalog order."""
    text = resources.files("servelab.hardware").joinpath("gpus.json").read_text(encoding="utf-8")
    return tuple(_from_json(row) for row in json.loads(text)["gpus"])


def gpu_names() -> tuple[str, ...]:
    return tuple(g.name for g in load_gpus())


def find_gpu(name: str) -> GPU:
    """The catalog GPU called `name` (or one of its aliases), or "cpu": this machine's CPU, its bandwidth
    measured once and cached (hardware/host.py); ConfigError listing the names otherwise."""
    wanted = _normalise(name)
    if wanted == CPU_DEVICE:
        from servelab.hardware.host import this_machine

        return this_machine()
    for gpu in load_gpus():
        if wanted in {_normalise(n) for n in (gpu.name, gpu.label, *gpu.aliases)}:
            return gpu
    raise ConfigError(
        f"unknown GPU {name!r}; choose one of: {', '.join(gpu_names())}, {CPU_DEVICE}"
        " (or give --vram/--bandwidth)"
    )


CUSTOM_TFLOPS = 100.0  # dense BF16 of a card built from --vram/--bandwidth alone (prefill ceilings only)
MAX_OVERRIDE = 1e6  # GiB, GB/s or TFLOPS: far beyond any card, below float overflow in the planner


def with_overrides(
    gpu: GPU | None,
    *,
    vram_gib: float | None = None,
    bandwidth_gb_s: float | None = None,
    tflops: float | None = None,
) -> GPU:
    """`gpu` with memory (GiB), bandwidth (GB/s) or dense BF16 TFLOPS replaced; a custom card when gpu is None."""
    for label, value in (("--vram", vram_gib), ("--bandwidth", bandwidth_gb_s), ("--tflops", tflops)):
        if value is not None:
            number(value, label, 0, MAX_OVERRIDE, above=True)
    if gpu is None:
        if vram_gib is None or bandwidth_gb_s is None:
            raise ConfigError("give --gpu NAME, or both --vram GB and --bandwidth GBps for a custom GPU")
        gpu = GPU(
            name="custom", label="custom GPU", memory_mib=0, bandwidth_gb_s=0, bf16_tflops=CUSTOM_TFLOPS
        )
    if vram_gib is not None:
        gpu = dataclasses.replace(gpu, memory_mib=round(vram_gib * 1024), cuda_memory_mib=None)
    if bandwidth_gb_s is not None:
        gpu = dataclasses.replace(gpu, bandwidth_gb_s=bandwidth_gb_s)
    if tflops is not None:
        gpu = dataclasses.replace(gpu, bf16_tflops=tflops, fp16_tflops=tflops)
    return gpu


def card_for(
    name: str | None,
    *,
    vram_gib: float | None = None,
    bandwidth_gb_s: float | None = None,
    tflops: float | None = None,
    default: str = "rtx4090",
) -> GPU:
    """The card `--gpu/--vram/--bandwidth/--tflops` name: a catalog entry (resized), or a custom card from
    --vram and --bandwidth together. An override alone is refused: it would silently resize the default card."""
    if name is None and vram_gib is not None and bandwidth_gb_s is not None:
        return with_overrides(None, vram_gib=vram_gib, bandwidth_gb_s=bandwidth_gb_s, tflops=tflops)
    if name is None and vram_gib is not None:
        raise ConfigError(
            "--vram without --gpu: give --gpu NAME (the card to resize) or --bandwidth GB/s (a custom card)"
        )
    if name is None and (bandwidth_gb_s is not None or tflops is not None):
        flag = "--bandwidth" if bandwidth_gb_s is not None else "--tflops"
        raise ConfigError(
            f"{flag} without --gpu: give --gpu NAME (the card to adjust) or --vram GiB and --bandwidth GB/s"
        )
    return with_overrides(
        find_gpu(default if name is None else name),
        vram_gib=vram_gib,
        bandwidth_gb_s=bandwidth_gb_s,
        tflops=tflops,
    )


def default_interconnect(gpu: GPU) -> str:
    """The link tensor parallelism uses when none is named: NVLink where the card has it, else PCIe P2P."""
    return "nvlink" if gpu.nvlink_gb_s else "pcie-p2p"

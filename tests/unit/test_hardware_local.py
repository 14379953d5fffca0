"""`--gpu auto`: NVML's cards (recorded probes, tests/fixtures/doctor/*/SOURCE.md) resolved against the catalog."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from servelab.diagnose.gpus import local_device
from servelab.diagnose.probe import RecordedProbe
from servelab.errors import ConfigError
from servelab.hardware.gpus import find_gpu
from servelab.hardware.local import CPU_DEVICE, resolve_local

FIXTURES = Path(__file__).parent.parent / "fixtures" / "doctor"


def test_two_h100_take_the_catalog_figures_and_nvml_memory() -> None:
    local = local_device(RecordedProbe(FIXTURES / "two-h100-sxm"))
    assert (local.device, local.count) == ("h100-sxm", 2)
    assert local.gpu is not None
    assert local.gpu.memory_mib == 81559  # NVML's total
    catalog = find_gpu("h100-sxm")
    assert (local.gpu.bandwidth_gb_s, local.gpu.bf16_tflops) == (catalog.bandwidth_gb_s, catalog.bf16_tflops)
    assert "2 x NVIDIA H100 80GB HBM3, 81,559 MiB = h100-sxm" in local.note


def test_a_catalog_card_takes_the_memory_nvml_reports() -> None:
    local = local_device(RecordedProbe(FIXTURES / "one-gpu-3090"))
    assert local.device == "rtx3090" and local.count == 1
    assert local.gpu is not None and local.gpu.memory_mib == 24576


def test_an_uncatalogued_card_asks_for_its_bandwidth() -> None:
    with pytest.raises(ConfigError) as caught:
        local_device(RecordedProbe(FIXTURES / "one-a10-uncatalogued"))
    message = str(caught.value)
    assert "NVIDIA A10, 22,731 MiB is not in the GPU catalog" in message and "--bandwidth GB/s" in message
    assert "\n" not in message


def test_an_uncatalogued_card_plans_with_nvml_memory_and_the_given_bandwidth() -> None:
    local = local_device(RecordedProbe(FIXTURES / "one-a10-uncatalogued"), bandwidth_gb_s=600)
    assert local.device == "custom" and local.gpu is not None
    assert (local.gpu.memory_mib, local.gpu.bandwidth_gb_s, local.gpu.label) == (22731, 600, "NVIDIA A10")
    assert "not in the catalog" in local.note and "no --tflops" in local.note
    with_tflops = local_device(
        RecordedProbe(FIXTURES / "one-a10-uncatalogued"), bandwidth_gb_s=600, tflops=125
    )
    assert with_tflops.gpu is not None and with_tflops.gpu.bf16_tflops == 125
    assert "no --tflops" not in with_tflops.note


@pytest.mark.parametrize(
    ("fixture", "device", "count", "memory_mib"),
    [("four-l20", "l20", 4, 46068), ("one-gh200", "gh200", 1, 97871)],
)
def test_recorded_nvml_names_of_the_new_cards_map_to_the_catalog(
    fixture: str, device: str, count: int, memory_mib: int
) -> None:
    local = local_device(RecordedProbe(FIXTURES / fixture))
    assert (local.device, local.count) == (device, count)
    assert local.gpu is not None and local.gpu.memory_mib == memory_mib
    assert local.gpu.bf16_tflops == find_gpu(device).bf16_tflops


def test_gb10_without_an_nvml_memory_total_keeps_the_cuda_total_from_the_catalog() -> None:
    local = resolve_local([Seen("NVIDIA GB10", None)])
    assert local.device == "gb10" and local.gpu is not None
    assert local.gpu.memory_mib == find_gpu("gb10").memory_mib


def test_no_gpu_resolves_to_the_cpu_device() -> None:
    local = local_device(RecordedProbe(FIXTURES / "no-gpu"))
    assert (local.device, local.gpu, local.count) == (CPU_DEVICE, None, 0)
    assert "NVML sees no GPU" in local.note and "planning for the CPU" in local.note


@dataclass(frozen=True)
class Seen:
    name: str
    memory_total_mib: int | None


def test_mixed_cards_are_planned_as_the_smallest() -> None:
    local = resolve_local([Seen("NVIDIA GeForce RTX 5090", 32607), Seen("NVIDIA GeForce RTX 3090", 24576)])
    assert local.device == "rtx3090" and local.count == 2
    assert "mixed cards" in local.note


def test_a_card_without_a_memory_answer_keeps_the_catalog_memory_or_asks_for_vram() -> None:
    known = resolve_local([Seen("NVIDIA H200", None)])
    assert known.gpu is not None and known.gpu.memory_mib == find_gpu("h200").memory_mib
    with pytest.raises(ConfigError, match="give --vram GiB to plan it"):
        resolve_local([Seen("NVIDIA A10", None)], bandwidth_gb_s=600)
    with pytest.raises(ConfigError, match="give --vram GiB and --bandwidth GB/s to plan it"):
        resolve_local([Seen("NVIDIA A10", None)])

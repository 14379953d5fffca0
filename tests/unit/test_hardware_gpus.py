"""GPU catalog lookup and overrides. Figures: vendor datasheets named in servelab/hardware/gpus.json."""

from __future__ import annotations

import pytest

from servelab.errors import ConfigError
from servelab.hardware.gpus import MIB, default_interconnect, find_gpu, gpu_names, load_gpus, with_overrides

REQUIRED = (
    "rtx3090",
    "rtx4090",
    "rtx4090-48g",
    "rtx5090",
    "rtx-a6000",
    "rtx6000-ada",
    "l4",
    "l40s",
    "a100-40g",
    "a100-80g",
    "h100-pcie",
    "h100-sxm",
    "h200",
    "b200",
    "mi300x",
    "m2-max",
    "m2-ultra",
    "m3-max",
    "m4-max",
)


def test_catalog_has_every_required_card_with_a_source() -> None:
    names = set(gpu_names())
    assert set(REQUIRED) <= names
    for gpu in load_gpus():
        assert gpu.memory_mib > 0 and gpu.bandwidth_gb_s > 0 and gpu.bf16_tflops > 0, gpu.name
        assert gpu.source, f"{gpu.name} has no source"


@pytest.mark.parametrize("spelling", ["RTX 4090", "rtx4090", "NVIDIA GeForce RTX 4090", "4090", "Rtx-4090"])
def test_lookup_ignores_case_spaces_and_vendor_prefixes(spelling: str) -> None:
    assert find_gpu(spelling).name == "rtx4090"


def test_rtx4090_figures_match_the_ada_whitepaper() -> None:
    gpu = find_gpu("rtx4090")
    assert gpu.memory_mib == 24564  # nvidia-smi total, docs/reference/memory.md §2
    assert gpu.bandwidth_gb_s == 1008
    assert gpu.bf16_tflops == pytest.approx(165.2)
    assert gpu.nvlink_gb_s is None


def test_the_48g_card_has_twice_the_memory_and_the_same_bandwidth() -> None:
    small, big = find_gpu("rtx4090"), find_gpu("RTX 4090 48GB")
    assert big.name == "rtx4090-48g"
    assert big.memory_mib == 49140 and big.bandwidth_gb_s == small.bandwidth_gb_s


def test_apple_cards_are_unified_memory_without_a_cuda_context() -> None:
    gpu = find_gpu("m3-ultra")
    assert gpu.unified_memory and gpu.runtime_context_bytes == 0
    assert find_gpu("h100").runtime_context_bytes > 0


def test_unknown_gpu_lists_the_catalog() -> None:
    with pytest.raises(ConfigError) as err:
        find_gpu("rtx9090")
    assert "rtx9090" in str(err.value) and "rtx4090-48g" in str(err.value) and "h200" in str(err.value)


def test_overrides_replace_memory_bandwidth_and_tflops() -> None:
    gpu = with_overrides(find_gpu("rtx3090"), vram_gib=48, bandwidth_gb_s=1000, tflops=100)
    assert gpu.memory_bytes == 48 * 1024 * MIB
    assert gpu.bandwidth_bytes_s == 1e12
    assert gpu.tensor_flops("bf16") == 100e12


def test_custom_gpu_needs_memory_and_bandwidth() -> None:
    with pytest.raises(ConfigError, match="--vram"):
        with_overrides(None, vram_gib=24)
    assert with_overrides(None, vram_gib=24, bandwidth_gb_s=500).memory_mib == 24 * 1024


def test_non_positive_override_is_rejected() -> None:
    with pytest.raises(
        ConfigError, match="--bandwidth must be a number above 0 and at most 1,000,000, got 0"
    ):
        with_overrides(find_gpu("l4"), bandwidth_gb_s=0)


def test_fp8_falls_back_to_bf16_where_the_card_has_none() -> None:
    a100 = find_gpu("a100-80g")
    assert a100.fp8_tflops is None
    assert a100.tensor_flops("fp8") == a100.tensor_flops("bf16")


@pytest.mark.parametrize("value", [1e308, float("inf"), float("nan")])
def test_absurd_overrides_are_rejected_not_overflowed(value: float) -> None:
    with pytest.raises(ConfigError, match="--vram must be a number above 0 and at most 1,000,000, got"):
        with_overrides(find_gpu("l4"), vram_gib=value)


def test_default_interconnect_is_nvlink_only_where_the_card_has_it() -> None:
    assert default_interconnect(find_gpu("h100-sxm")) == "nvlink"
    assert default_interconnect(find_gpu("rtx4090")) == "pcie-p2p"


def test_docs_list_every_catalog_gpu_with_its_source() -> None:
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "planning.md").read_text(encoding="utf-8")
    for gpu in load_gpus():
        assert f"| {gpu.name} |" in doc and gpu.source in doc, f"{gpu.name} missing from docs/planning.md"


def test_cuda_cards_carry_their_compute_capability() -> None:
    assert find_gpu("rtx4090").compute_capability == "8.9"
    assert find_gpu("rtx5090").compute_capability == "12.0"
    assert find_gpu("mi325x").compute_capability is None and find_gpu("m4-max").compute_capability is None
    assert find_gpu("AMD Instinct MI325X").bandwidth_gb_s == 6000

"""GPU catalog lookup and overrides. Figures: vendor datasheets named in servelab/hardware/gpus.json."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from servelab.errors import ConfigError
from servelab.hardware.catalog_table import render_table
from servelab.hardware.gpus import (
    FIGURES,
    GPU,
    MIB,
    default_interconnect,
    find_gpu,
    gpu_names,
    load_gpus,
    with_overrides,
)
from servelab.model.load import load_model
from servelab.plan.make import make_plan

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
    doc = (Path(__file__).resolve().parents[2] / "docs" / "planning.md").read_text(encoding="utf-8")
    for gpu in load_gpus():
        assert f"| {gpu.name} |" in doc and gpu.source in doc, f"{gpu.name} missing from docs/planning.md"


def test_cuda_cards_carry_their_compute_capability() -> None:
    assert find_gpu("rtx4090").compute_capability == "8.9"
    assert find_gpu("rtx5090").compute_capability == "12.0"
    assert find_gpu("mi325x").compute_capability is None and find_gpu("m4-max").compute_capability is None
    assert find_gpu("AMD Instinct MI325X").bandwidth_gb_s == 6000


ROOT = Path(__file__).resolve().parents[2]
NEW_CARDS = (
    "rtx-pro-6000",
    "rtx-pro-6000-server",
    "rtx-a5000",
    "rtx-a4000",
    "rtx4080",
    "rtx5080",
    "h20",
    "b300",
    "mi355x",
    "l20",
    "gh200",
    "gb10",
)
STATED = re.compile(r"^(\d+(?:\.\d+)?) (GB|GiB) ")


def _stated(gpu: GPU) -> tuple[float, str]:
    match = STATED.match(gpu.memory_stated)
    assert match, f"{gpu.name}: memory_stated {gpu.memory_stated!r} does not start with '<number> GB'"
    return float(match.group(1)), match.group(2)


@pytest.mark.parametrize("gpu", load_gpus(), ids=lambda g: g.name)
def test_every_stated_figure_has_a_source(gpu: GPU) -> None:
    sources = gpu.figure_sources
    assert set(sources) <= set(FIGURES), (
        f"{gpu.name}: sources for unknown figures {set(sources) - set(FIGURES)}"
    )
    for figure in FIGURES:
        if getattr(gpu, figure) is None:
            assert figure not in sources, f"{gpu.name}: a source for {figure}, which the entry does not state"
            continue
        if figure in gpu.unsourced:
            assert figure not in sources
            continue
        where = sources.get(figure, "")
        assert where.startswith("https://") or (ROOT / where).is_file(), f"{gpu.name}: {figure} has no source"


@pytest.mark.parametrize("gpu", load_gpus(), ids=lambda g: g.name)
def test_figures_are_positive_and_memory_matches_the_stated_capacity(gpu: GPU) -> None:
    assert gpu.bandwidth_gb_s > 0
    for figure in (
        "fp16_tflops",
        "bf16_tflops",
        "fp8_tflops",
        "fp4_tflops",
        "int8_tflops",
        "tdp_w",
        "nvlink_gb_s",
    ):
        value = getattr(gpu, figure)
        assert value is None or value > 0, f"{gpu.name}: {figure} = {value}"
    amount, unit = _stated(gpu)
    # A vendor's "96 GB" is the capacity in GiB less what ECC/firmware reserve: between amount x 10^9 and amount GiB.
    low = amount * (2**30 if unit == "GiB" else 10**9)
    assert low <= gpu.memory_bytes <= amount * 2**30, (
        f"{gpu.name}: {gpu.memory_mib} MiB vs {gpu.memory_stated!r}"
    )


def test_new_cards_have_every_figure_sourced_and_halve_sparse_marketing() -> None:
    for name in NEW_CARDS:
        gpu = find_gpu(name)
        assert not gpu.unsourced, name
    assert find_gpu("rtx-a4000").bf16_tflops == pytest.approx(153.4 / 2)  # datasheet 153.4 is with sparsity
    assert find_gpu("rtx-a5000").bf16_tflops == pytest.approx(222.2 / 2, abs=0.05)
    pro = find_gpu("RTX PRO 6000 Blackwell Workstation Edition")
    assert (
        pro.fp4_tflops == 4000 / 2 and pro.bf16_tflops == pro.fp4_tflops / 4
    )  # 4000 AI TOPS: FP4 with sparsity
    assert find_gpu("rtx5080").bf16_tflops == pytest.approx(
        1801 / 16, abs=0.05
    )  # GeForce: FP32 accumulate at half rate


def test_new_cards_are_found_by_their_nvml_names() -> None:
    assert find_gpu("NVIDIA RTX PRO 6000 Blackwell Server Edition").bandwidth_gb_s == 1597
    assert find_gpu("NVIDIA RTX PRO 6000 Blackwell Workstation Edition").bandwidth_gb_s == 1792
    assert find_gpu("NVIDIA GeForce RTX 4080").name == "rtx4080"
    assert find_gpu("NVIDIA H20").memory_mib == 96 * 1024
    assert find_gpu("AMD Instinct MI355X").fp8_tflops == 5000
    assert find_gpu("NVIDIA L20").name == "l20"
    assert find_gpu("NVIDIA GH200 480GB").name == "gh200"
    assert find_gpu("NVIDIA GB10").name == "gb10" and find_gpu("DGX Spark").name == "gb10"


def test_the_l20_and_gh200_take_their_dense_rates_and_nvidia_smi_totals() -> None:
    l20, gh200, h100 = find_gpu("l20"), find_gpu("gh200"), find_gpu("h100-sxm")
    assert (l20.memory_mib, l20.bandwidth_gb_s, l20.bf16_tflops) == (46068, 864, 119.5)
    assert l20.fp8_tflops is None and l20.tensor_flops("fp8") == l20.tensor_flops("bf16")
    # GH200's GPU is an H100 SXM with 96 GB HBM3 at 4 TB/s; the "480GB" is the Grace CPU's memory, not counted.
    assert (gh200.bf16_tflops, gh200.fp8_tflops) == (h100.bf16_tflops, h100.fp8_tflops)
    assert gh200.memory_mib == 97871 and gh200.memory_bytes < 96 * 2**30 and gh200.bandwidth_gb_s == 4000
    assert gh200.nvlink_gb_s is None and default_interconnect(gh200) == "pcie-p2p"


def test_gb10_is_a_cuda_device_whose_memory_is_what_cuda_reports_not_the_ram_sold() -> None:
    gb10 = find_gpu("gb10")
    assert gb10.memory_stated.startswith("128 GB") and gb10.memory_bytes == 128538451968 // MIB * MIB
    assert gb10.memory_bytes < 128 * 2**30  # the OS and firmware keep the rest of the unified pool
    assert not gb10.unified_memory and gb10.runtime_context_bytes > 0  # not Apple Metal: CUDA engines run
    assert gb10.fp4_tflops == 1000 / 2  # NVIDIA's 1 PFLOP FP4 is with sparsity
    assert gb10.compute_capability == "12.1"


def test_docs_list_every_source_url_and_every_unsourced_figure() -> None:
    doc = (ROOT / "docs" / "planning.md").read_text(encoding="utf-8")
    for gpu in load_gpus():
        for figure, where in gpu.sources:
            assert where in doc, f"{gpu.name}: {figure} source {where} missing from docs/planning.md"
        for figure in gpu.unsourced:
            assert f"{gpu.name} {figure}" in doc, (
                f"{gpu.name}: unsourced {figure} not listed in docs/planning.md"
            )


def test_docs_hold_the_generated_catalog_table() -> None:
    doc = (ROOT / "docs" / "planning.md").read_text(encoding="utf-8")
    assert render_table() in doc, (
        "regenerate: python -m servelab.hardware.catalog_table, paste over docs/planning.md's table"
    )


def test_the_table_renders_each_figure_once_with_its_source_group() -> None:
    row = next(line for line in render_table().splitlines() if line.startswith("| h200 |"))
    cells = row.split(" | ")
    assert cells[1] == "143,771 (141 GB HBM3e; CUDA 143,073)" and cells[2] == "4,800" and cells[3] == "989.5"
    assert "mem: https://github.com/sgl-project/sglang/issues/3196" in row
    assert "cuda: https://github.com/vllm-project/vllm/issues/23192" in row
    plain = next(line for line in render_table().splitlines() if line.startswith("| rtx4090 |"))
    assert plain.split(" | ")[1] == "24,564 (24 GB GDDR6X)"  # no CUDA total read from a log: none shown


def test_the_cuda_total_is_what_vllm_multiplies_by_the_utilization() -> None:
    """vLLM's requested memory is utilization x the total CUDA reports (gpu_worker.py), below nvidia-smi's total
    by the driver's reserve: the plan budgets from the lower figure where a log has shown it."""
    h100, l40s = find_gpu("h100"), find_gpu("l40s")
    assert h100.cuda_memory_bytes == 81234 * 2**20 < h100.memory_bytes
    assert l40s.cuda_memory_bytes == l40s.memory_bytes  # none read yet: nvidia-smi's total
    assert with_overrides(h100, vram_gib=80).cuda_memory_bytes == 80 * 2**30  # --vram replaces both
    model = load_model("Qwen/Qwen3-8B")
    budgets = [
        make_plan(model, gpu, engine="vllm", context=8192).details["kv_budget_bytes"]
        for gpu in (h100, dataclasses.replace(h100, cuda_memory_mib=None))
    ]
    assert budgets[1] - budgets[0] == int(h100.memory_bytes * 0.9) - int(h100.cuda_memory_bytes * 0.9)
    assert "Unsourced figures" in render_table()


@pytest.mark.parametrize(
    ("spelling", "name"),
    [
        ("Apple M4", "m4"),
        ("m4-pro", "m4-pro"),
        ("Apple M4 Pro", "m4-pro"),
        ("Apple M5", "m5"),
        ("m5 pro", "m5-pro"),
        ("Apple M5 Max", "m5-max"),
        ("4080 super", "rtx4080-super"),
        ("NVIDIA GeForce RTX 4080 SUPER", "rtx4080-super"),
    ],
)
def test_the_m4_m5_families_and_the_4080_super_are_found(spelling: str, name: str) -> None:
    gpu = find_gpu(spelling)
    assert gpu.name == name
    assert not gpu.unsourced
    for figure in ("memory_mib", "bandwidth_gb_s", "fp16_tflops", "bf16_tflops"):
        assert gpu.figure_sources[figure].startswith("https://"), f"{name}: {figure}"


def test_the_plain_4080_is_not_taken_for_the_super() -> None:
    assert find_gpu("4080").name == "rtx4080" and find_gpu("RTX 4080 SUPER").name == "rtx4080-super"


def test_apple_entries_take_the_largest_memory_and_apples_bandwidth() -> None:
    """Memory and bandwidth as Apple's tech specs and press releases state them for the top configuration."""
    stated = {
        "m4": (32, 120),
        "m4-pro": (64, 273),
        "m5": (32, 153),
        "m5-pro": (64, 307),
        "m5-max": (128, 614),
    }
    for name, (gib, gb_s) in stated.items():
        gpu = find_gpu(name)
        assert gpu.unified_memory and gpu.runtime_context_bytes == 0
        assert (gpu.memory_mib, gpu.bandwidth_gb_s) == (gib * 1024, gb_s), name
        assert gpu.compute_capability is None and gpu.fp8_tflops is None


def test_apple_rates_are_measured_gemms_and_the_m3_ultra_has_one_now() -> None:
    m3u = find_gpu("m3-ultra")
    assert not m3u.unsourced and m3u.bf16_tflops == 17.4  # MLX FP16 matmul, Rapid-MLX PR 258
    assert find_gpu("m5-max").fp16_tflops == 59.64  # MLX FP16 GEMM, ml-explore/mlx PR 3211
    # 2 x 1280^3 FLOP in 0.3099 ms (ml-explore/mlx PR 3295)
    assert find_gpu("m5-pro").bf16_tflops == pytest.approx(2 * 1280**3 / 0.3099e-3 / 1e12, abs=0.05)
    # the Neural Accelerators: the M5's 10 cores out-multiply the M4 Pro's 16 at 16 bits
    assert find_gpu("m5").fp16_tflops > find_gpu("m4-pro").fp16_tflops > find_gpu("m4").fp16_tflops


def test_the_4080_super_scales_the_4080_by_its_ai_tops() -> None:
    """836 AI TOPS (FP8 with sparsity) vs the RTX 4080's 780: dense, then GeForce FP32 accumulate at half rate."""
    plain, sup = find_gpu("rtx4080"), find_gpu("rtx4080-super")
    assert sup.bf16_tflops == pytest.approx(836 / 8) == pytest.approx(plain.bf16_tflops * 836 / 780)
    assert sup.fp8_tflops == pytest.approx(836 / 4)
    assert (sup.memory_mib, sup.bandwidth_gb_s, sup.tdp_w) == (16384, 23 * 256 / 8, 320)
    assert sup.compute_capability == "8.9" and default_interconnect(sup) == "pcie-p2p"


@pytest.mark.parametrize(
    ("nvml", "name"),
    [
        ("NVIDIA A40", "a40"),
        ("NVIDIA A100 80GB PCIe", "a100-80g-pcie"),
        ("NVIDIA RTX 4000 Ada Generation", "rtx4000-ada"),
        ("NVIDIA RTX 5000 Ada Generation", "rtx5000-ada"),
        ("NVIDIA GeForce RTX 3070", "rtx3070"),
        ("NVIDIA GeForce RTX 3080", "rtx3080"),
        ("NVIDIA GeForce RTX 4070 Ti", "rtx4070-ti"),
    ],
)
def test_the_corpus_cards_are_found_by_their_nvml_names_with_every_figure_sourced(
    nvml: str, name: str
) -> None:
    gpu = find_gpu(nvml)
    assert gpu.name == name and not gpu.unsourced
    assert gpu.int8_tflops is not None and gpu.pcie_gen == 4  # llama.cpp's MMQ path: int8 tensor cores
    for figure in ("memory_mib", "bandwidth_gb_s", "bf16_tflops", "int8_tflops"):
        assert gpu.figure_sources[figure].startswith("https://"), f"{name}: {figure}"


def test_the_corpus_cards_figures_follow_their_sheets() -> None:
    """Dense rates: the A40's 149.7 (299.4 sparse); GeForce Ampere FP32 accumulate and INT8 = 4x it (GA102
    whitepaper); the 4070 Ti's 641 AI TOPS (FP8 sparse) at the RTX 4090's ratios; Ada workstation cards at full
    FP32-accumulate rate, INT8 = FP8; the A100 PCIe is the SXM's compute at 1,935 GB/s and 300 W."""
    a40, pcie, sxm = find_gpu("a40"), find_gpu("a100-80g-pcie"), find_gpu("a100-80g")
    assert (a40.bf16_tflops, a40.int8_tflops, a40.bandwidth_gb_s, a40.nvlink_gb_s) == (
        149.7,
        299.3,
        696,
        112.5,
    )
    assert (pcie.bf16_tflops, pcie.int8_tflops) == (sxm.bf16_tflops, sxm.int8_tflops)
    assert (pcie.bandwidth_gb_s, pcie.tdp_w) == (1935, 300) and pcie.memory_mib == sxm.memory_mib
    for name, tflops in (("rtx3070", 40.6), ("rtx3080", 59.5)):
        gpu = find_gpu(name)
        assert gpu.bf16_tflops == tflops and gpu.int8_tflops == pytest.approx(
            4 * tflops, abs=0.25
        )  # both rounded
    ti = find_gpu("rtx4070-ti")
    assert (ti.bf16_tflops, ti.fp8_tflops, ti.int8_tflops) == (641 / 8, 641 / 4, 641 / 2)
    for name, bw in (("rtx4000-ada", 360), ("rtx5000-ada", 576)):
        gpu = find_gpu(name)
        assert gpu.bandwidth_gb_s == bw and gpu.fp8_tflops == gpu.int8_tflops == pytest.approx(
            2 * gpu.bf16_tflops, abs=0.01
        )


def test_the_m1_entries_are_apple_cards_at_apples_figures() -> None:
    """M1 Max: 400 GB/s, 64 GB, 32 cores at twice the M1 Pro's 5.2 TFLOPS; M1 (7-core): 2.6 TFLOPS x 7/8."""
    m1max, m1 = find_gpu("Apple M1 Max"), find_gpu("apple m1")
    assert (m1max.name, m1max.bandwidth_gb_s, m1max.memory_mib, m1max.bf16_tflops) == (
        "m1-max",
        400,
        64 * 1024,
        10.4,
    )
    assert m1.name == "m1" and m1.bf16_tflops == pytest.approx(2.6 * 7 / 8)
    for gpu in (m1, m1max):
        assert gpu.unified_memory and gpu.runtime_context_bytes == 0 and gpu.int8_tflops is None
        assert not gpu.unsourced and gpu.figure_sources["bandwidth_gb_s"].startswith("https://")

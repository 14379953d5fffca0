"""vLLM's hybrid allocator (engines/vllm/memory.py) against exact figures vLLM printed: the attention block size
from the mamba page, the padding, the groups, the blocks one request takes per mamba_cache_mode, max concurrency
and the logged KV cache size (docs/reference/memory.md §3 Hybrid, docs/reference/vllm-cpu.md §5).

Each pool below is given as vLLM sized it (--kv-cache-memory-bytes, or the CPU's VLLM_CPU_KVCACHE_SPACE), so only
the allocator's rules are under test, not the profile run.
"""

from __future__ import annotations

import dataclasses

import pytest

from servelab.engines.vllm.memory import (
    CPU_BLOCK_SIZE,
    hybrid_block_size,
    kernel_block_alignment,
    mamba_padding,
    vllm_memory,
)
from servelab.model.catalog import catalog_model
from servelab.model.hf_config import spec_from_config
from servelab.model.spec import ModelSpec
from servelab.modelmake import hf_granite, hf_qwen3next
from servelab.modelmake.shapes import shape_for
from servelab.sizing.kv import layer_kv_bytes_per_token
from servelab.sizing.state import state_layout
from tests.unit.plan_models import qwen35_27b

GIB = 1024**3


def _tiny(module, kind: str) -> ModelSpec:
    """The tiny Hugging Face model servelab makes and docs/reference/vllm-cpu.md §5 served with vLLM CPU 0.32."""
    return spec_from_config(module.config(shape_for(kind, "hf")), name=kind, source="hf")


def _pool(model: ModelSpec, pool_bytes: int, **kwargs) -> object:
    return vllm_memory(
        model,
        gpu_memory_bytes=80 * GIB,
        weights_bytes=0,
        kv_cache_memory_bytes=pool_bytes,
        **{"enforce_eager": True, **kwargs},
    )


def test_the_kernel_alignment_per_backend() -> None:
    # models/config.py: 16 for FlashAttention/FlashInfer; 32 for head 256 on the SM100 family only (an RTX 5090
    # is SM120 and keeps 16); 64 for MLA; never below a block size the platform set first (the CPU's 128)
    assert kernel_block_alignment("12.0", 256) == 16
    assert kernel_block_alignment("10.0", 256) == 32
    assert kernel_block_alignment("10.0", 128) == 16
    assert kernel_block_alignment("9.0", 128, mla=True) == 64
    assert kernel_block_alignment(None, 64, preset_block_size=CPU_BLOCK_SIZE) == 128


@pytest.mark.parametrize(
    "module,kind,block,padding",
    [(hf_qwen3next, "qwen3-next", 256, 0.9104), (hf_granite, "granite-hybrid", 384, 0.4573)],
)
def test_cpu_hybrid_block_and_padding(module, kind: str, block: int, padding: float) -> None:
    # vLLM CPU 0.32 on servelab's tiny models: "Setting attention block size to 256 / 384 tokens", "Padding mamba
    # page size by 91.04% / 45.73%" (one attention layer of 2 KV heads x 64 in bf16: 512 B a token; the GDN page
    # 3,072 + 65,536 B, the Mamba2 page 3,840 + 131,072 B)
    model = _tiny(module, kind)
    token = layer_kv_bytes_per_token(model, 3, "bf16", 1)
    mamba = state_layout(model).bytes_per_layer
    align = kernel_block_alignment(None, 64, preset_block_size=CPU_BLOCK_SIZE)
    assert hybrid_block_size(token, mamba, align, CPU_BLOCK_SIZE) == block
    assert round(mamba_padding(block * token, mamba), 4) == padding


def test_cpu_qwen3_next_align_mode_capacity() -> None:
    # "Mamba cache mode is set to 'align'", "CPU KV cache size: 1,198,372 tokens, Maximum concurrency for 2,048
    # tokens per request: 585.14x": 1 GiB / (256 x 512 B) = 8192 blocks (groups of one layer: 1 full + 3 GDN);
    # a request takes ceil(2048 / 256) = 8 + 3 x 2 = 14 blocks; 8192 / 14 = 585.14; int(585.14... x 2048)
    m = _pool(
        _tiny(hf_qwen3next, "qwen3-next"),
        GIB,
        max_model_len=2048,
        block_align=CPU_BLOCK_SIZE,
        default_block_size=CPU_BLOCK_SIZE,
        enable_prefix_caching=True,
    )
    assert (m.block_size, m.group_size, m.num_groups, m.num_blocks) == (256, 1, 4, 8192)
    assert m.blocks_per_request == 14
    assert round(m.max_concurrency, 2) == 585.14
    assert m.kv_tokens == 1_198_372


def test_align_mode_on_a_5090_nvfp4_35b() -> None:
    # vllm/qwen3.6-35b-a3b-nvfp4-rtx5090-fp8kv (v0.24.0, fp8 KV, prefix caching on): "Available KV cache memory:
    # 5.98 GiB", "GPU KV cache size: 567,978 tokens", "Maximum concurrency for 131,072 tokens per request: 4.33x".
    # 2 KV heads x 256 at 1 B: 1,024 B a token; GDN page 49,152 + 2,097,152 B -> block 2,096 (a multiple of 16,
    # SM120), no padding; 10 full + 30 GDN -> groups of 10; 5.98 GiB // (2,096 x 1,024 x 10) = 299 blocks;
    # ceil(131,072 / 2,096) = 63 + 3 x 2 = 69 a request; 299 / 69 = 4.33; int(299 / 69 x 131,072) = 567,978
    model = catalog_model("Qwen/Qwen3.5-35B-A3B")
    align = kernel_block_alignment("12.0", 256)
    m = _pool(
        model,
        int(5.98 * GIB),
        max_model_len=131072,
        kv_cache_dtype="fp8",
        block_align=align,
        enable_prefix_caching=True,
    )
    assert (m.block_size, m.page_bytes, m.group_size, m.num_groups) == (2096, 2096 * 1024, 10, 4)
    assert m.num_blocks == 299 and m.blocks_per_request == 69
    assert round(m.max_concurrency, 2) == 4.33
    assert m.kv_tokens == 567_978
    # without prefix caching (mamba_cache_mode 'none') each GDN group holds one block
    off = _pool(model, int(5.98 * GIB), max_model_len=131072, kv_cache_dtype="fp8", block_align=align)
    assert off.blocks_per_request == 63 + 3


def test_align_mode_with_mtp_on_two_3090s() -> None:
    # vllm/qwen3.6-27b-autoround-int4-2x3090-mtp (TP2, fp8_e5m2 KV, MTP 3 tokens, prefix caching on): "GPU KV
    # cache size: 620,944 tokens", "Maximum concurrency for 262,144 tokens per request: 2.37x". Per GPU: 2 KV
    # heads x 256 at 1 B = 1,024 B a token; GDN conv (3 + 3) x 5,120 x 2 B + SSM 24 x 128 x 128 x 4 B =
    # 1,634,304 B -> block 1,600; 16 + 1 MTP attention layers and 48 GDN -> 4 groups of 17 (3 padding layers);
    # a request: ceil(262,144 / 1,600) = 164 + 3 x (2 + 3) = 179 blocks. The log has no budget line: 424 blocks is
    # the pool the two figures imply (424 / 179 = 2.37; int(424 / 179 x 262,144) = 620,944).
    model = dataclasses.replace(qwen35_27b(), weights=())
    block_bytes = 1600 * 1024 * 17
    m = _pool(
        model,
        424 * block_bytes,
        tp=2,
        max_model_len=262144,
        kv_cache_dtype="fp8_e5m2",
        speculative_tokens=3,
        draft_layers=1,
        enable_prefix_caching=True,
    )
    assert (m.block_size, m.group_size, m.num_groups, m.padding_layers) == (1600, 17, 4, 3)
    assert m.num_blocks == 424 and m.blocks_per_request == 179
    assert round(m.max_concurrency, 2) == 2.37
    assert m.kv_tokens == 620_944


def test_the_mamba_blocks_are_the_whole_pool() -> None:
    # config/compilation.py: "max_num_seqs (N) exceeds available Mamba cache blocks (kv_cache_config.num_blocks)"
    model = dataclasses.replace(qwen35_27b(), weights=())
    m = _pool(model, 100 * 784 * 4096 * 16, max_model_len=32768, max_num_seqs=256, enforce_eager=False)
    assert m.block_size == 784 and m.mamba_blocks == m.num_blocks == 100
    assert any("exceeds available Mamba cache blocks (100)" in r.message for r in m.refusals)


@pytest.mark.parametrize(
    ("version", "flags", "refused", "capped"),
    [
        ("0.20.0", {}, True, False),  # the check arrives with v0.20.0 (compilation.py, has_full_cudagraphs())
        ("0.26.0", {"cudagraph_mode": "FULL_AND_PIECEWISE"}, True, False),
        ("0.26.0", {"cudagraph_mode": "FULL_DECODE_ONLY"}, True, False),
        ("0.26.0", {"enforce_eager": True}, False, False),  # mode NONE: no full graphs, the launch starts
        ("0.26.0", {"cudagraph_mode": "PIECEWISE"}, False, False),
        ("0.19.1", {}, False, True),  # v0.18-v0.19: capture sizes capped to the blocks, with a warning
        ("0.18.0", {}, False, True),
        ("0.16.0", {}, False, False),
    ],
)
def test_the_mamba_block_check_needs_full_cuda_graphs_and_v0_20(
    version: str, flags: dict[str, object], refused: bool, capped: bool
) -> None:
    model = dataclasses.replace(qwen35_27b(), weights=())
    kwargs = {"enforce_eager": False, **flags}
    m = _pool(model, 100 * 784 * 4096 * 16, max_model_len=32768, max_num_seqs=256, version=version, **kwargs)
    assert m.mamba_blocks == 100
    assert any("exceeds available Mamba cache blocks" in r.message for r in m.refusals) == refused
    assert any("caps the CUDA-graph capture sizes" in w for w in m.warnings) == capped


def test_prefix_caching_reaches_the_plan_and_its_command() -> None:
    from servelab.hardware.gpus import find_gpu
    from servelab.plan.make import make_plan

    model, gpu = catalog_model("Qwen/Qwen3.5-35B-A3B"), find_gpu("rtx5090")
    asked = dict(engine="vllm", quant="nvfp4", context=131072, kv_dtype="fp8", max_num_seqs=1)
    off = make_plan(model, gpu, **asked)
    on = make_plan(model, gpu, enable_prefix_caching=True, **asked)
    assert on.details["block_size"] == off.details["block_size"] == 2096  # SM120: alignment 16
    assert on.details["num_blocks"] == off.details["num_blocks"]
    blocks = on.details["num_blocks"]
    assert (on.details["max_concurrency"], off.details["max_concurrency"]) == (
        round(blocks / 69, 2),
        round(blocks / 66, 2),
    )
    assert "--enable-prefix-caching" in on.command and "--enable-prefix-caching" not in off.command

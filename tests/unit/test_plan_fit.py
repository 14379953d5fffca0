"""The fit verdict is never optimistic (issue 16 item 3): every condition under which the engine refuses to start,
or would not serve the asked context, is a refusal naming the flag that fixes it, and any refusal makes
`fits` false. Conditions from the engines' sources (docs/reference/memory.md §2-4, "Refusals")."""

from __future__ import annotations

import dataclasses

import pytest

from servelab.engines.sglang.memory import sglang_memory
from servelab.engines.vllm.memory import NON_TORCH_BYTES, activation_peak_bytes, cuda_graph_bytes, vllm_memory
from servelab.hardware.gpus import find_gpu
from servelab.model.load import load_model
from servelab.plan.make import make_plan, search_plan
from tests.unit.plan_models import dense_gqa, qwen35_27b

GIB, MIB = 1024**3, 1024**2


def test_vllm_default_max_num_seqs_beyond_the_mamba_blocks_does_not_fit() -> None:
    # before: fits true beside the warning "max_num_seqs (256) exceeds available Mamba cache blocks (49)"
    # (512 tokens: the CUDA graphs of 256 sequences and the first capture's activations take ~2 GiB from v0.21,
    # so from 1,024 tokens one request no longer fits either; the remedy's fewer sequences capture fewer graphs)
    qwen, card = load_model("Qwen/Qwen3.5-27B"), find_gpu("rtx4090")
    plan = make_plan(qwen, card, engine="vllm", quant="awq", context=512)
    blocks = plan.details["mamba_blocks"]
    assert isinstance(blocks, int) and 0 < blocks < 256
    assert not plan.fits and plan.remedy == {"max_num_seqs": blocks}
    assert plan.refusals[0].startswith(
        f"vLLM: max_num_seqs (256) exceeds available Mamba cache blocks ({blocks})"
    )
    assert f"pass --max-num-seqs {blocks}" in plan.refusals[0] and plan.warnings[0] == plan.refusals[0]
    fixed = make_plan(qwen, card, engine="vllm", quant="awq", context=512, max_num_seqs=blocks)
    assert fixed.fits and ["--max-num-seqs", str(blocks)] == list(fixed.command[-2:])


def test_vllm_pool_smaller_than_one_request_refuses_with_the_estimated_length() -> None:
    # check_enough_kv_cache_memory: 40,960 tokens of the Qwen3-8B shape need 5.62 GiB; 4.5 GiB are there
    model, weights, seqs = dense_gqa(layers=36), int(15.27 * GIB), 256
    total = int(4.5 * GIB) + weights + activation_peak_bytes(model, 2048, seqs, 1) + NON_TORCH_BYTES
    m = vllm_memory(
        model,
        gpu_memory_bytes=total,
        weights_bytes=weights,
        gpu_memory_utilization=1.0,
        enforce_eager=True,
        max_model_len=40960,
    )
    assert not m.fits and len(m.refusals) == 1
    assert m.refusals[0].message == (
        "vLLM: To serve at least one request with the model's max seq len (40960), (5.62 GiB KV cache is needed,"
        " which is larger than the available KV cache memory (4.50 GiB); the estimated maximum model length is"
        " 32768: pass --max-model-len 32768, --kv-cache-dtype fp8 or a higher --gpu-memory-utilization"
    )


def test_vllm_no_memory_for_cache_blocks() -> None:
    m = vllm_memory(dense_gqa(), gpu_memory_bytes=16 * GIB, weights_bytes=16 * GIB)
    assert m.kv_budget_bytes == 0 and not m.fits
    assert m.refusals[0].message.startswith("vLLM: No available memory for the cache blocks")


def test_vllm_batched_tokens_below_max_num_seqs() -> None:
    # config/scheduler.py: max_num_batched_tokens (128) must be greater than or equal to max_num_seqs (256)
    m = vllm_memory(
        dense_gqa(),
        gpu_memory_bytes=80 * GIB,
        weights_bytes=16 * GIB,
        max_num_batched_tokens=128,
        max_num_seqs=256,
        max_model_len=8192,
    )
    assert [r.fix for r in m.refusals] == [{"max_num_seqs": 128}]
    assert (
        "max_num_batched_tokens (128) must be greater than or equal to max_num_seqs (256)"
        in m.refusals[0].message
    )


def test_vllm_startup_free_memory_below_the_utilization() -> None:
    # gpu_worker.py: free memory at start (total - CUDA context) must cover utilization x total
    m = vllm_memory(
        dense_gqa(),
        gpu_memory_bytes=24 * GIB,
        free_memory_bytes=23 * GIB,
        weights_bytes=GIB,
        gpu_memory_utilization=0.98,
        max_model_len=8192,
    )
    assert [r.fix for r in m.refusals] == [{"gpu_memory_utilization": 0.95}]  # floor(23 / 24, 2 places)
    assert m.refusals[0].message.startswith("vLLM: Free memory on device (23.00/24.00 GiB) on startup")


def test_vllm_kv_cache_memory_bytes_sizes_the_pool_and_must_fit() -> None:
    kw = dict(
        gpu_memory_bytes=24 * GIB, free_memory_bytes=23 * GIB, weights_bytes=16 * GIB, max_model_len=8192
    )
    m = vllm_memory(dense_gqa(), kv_cache_memory_bytes=2 * GIB, **kw)  # type: ignore[arg-type]
    # page = 16 tokens x 8 heads x 128 x 2 (K,V) x 2 bytes = 64 KiB per layer; 32 layers in one group
    assert m.kv_budget_bytes == 2 * GIB and m.num_blocks == 2 * GIB // (65536 * 32) == 1024
    assert m.kv_tokens == 1024 * 16 and m.fits
    big = vllm_memory(dense_gqa(), kv_cache_memory_bytes=8 * GIB, **kw)  # type: ignore[arg-type]
    room = 23 * GIB - 16 * GIB - activation_peak_bytes(dense_gqa(), 2048, 256, 1) - NON_TORCH_BYTES
    room -= cuda_graph_bytes(dense_gqa(), 256, 2048)
    assert [r.message for r in big.refusals] == [
        "vLLM: --kv-cache-memory-bytes 8589934592 does not fit beside the weights and activations (CUDA out of"
        f" memory); pass --kv-cache-memory-bytes {room} or less"
    ]


def test_sglang_pool_below_the_context_is_a_refusal_with_the_mamba_fix() -> None:
    # sglang starts but caps requests at max_total_tokens - 1: the asked context is not served
    kw = dict(
        gpu_memory_bytes=48 * GIB, weights_bytes=17 * GIB, mem_fraction_static=0.9, context_length=262144
    )
    m = sglang_memory(qwen35_27b(), **kw)  # type: ignore[arg-type]
    assert m.max_total_tokens < 262144 and not m.fits
    (refusal,) = m.refusals
    budget, cell, per_req = m.pool_budget_bytes, m.kv_cell_bytes, m.mamba_state_bytes_per_request
    slots = (budget - 262144 * cell) // per_req
    assert refusal.fix == {"max_mamba_cache_size": slots}
    assert refusal.message.startswith(f"sglang: the KV pool holds {m.max_total_tokens} tokens, fewer than")
    fixed = sglang_memory(qwen35_27b(), max_mamba_cache_size=slots, **kw)  # type: ignore[arg-type]
    assert fixed.fits and fixed.max_total_tokens >= 262144


def test_sglang_max_total_tokens_below_the_context_does_not_fit() -> None:
    m = sglang_memory(
        dense_gqa(),
        gpu_memory_bytes=80 * GIB,
        weights_bytes=16 * GIB,
        context_length=32768,
        max_total_tokens=16384,
    )
    assert not m.fits and m.max_req_len == 16383


def test_llamacpp_allocation_failure_names_ngl_and_n_cpu_moe() -> None:
    moe, card = load_model("Qwen/Qwen3-30B-A3B"), find_gpu("rtx4090")
    plan = make_plan(moe, card, engine="llamacpp", quant="Q8_0", context=8192)
    assert not plan.fits and plan.refusals[0].startswith("llama.cpp: failed to allocate its CUDA buffers")
    n = int(plan.refusals[0].split("--n-cpu-moe ")[1].split()[0])
    fixed = make_plan(moe, card, engine="llamacpp", quant="Q8_0", context=8192, n_cpu_moe=n)
    short = make_plan(moe, card, engine="llamacpp", quant="Q8_0", context=8192, n_cpu_moe=n - 1)
    assert fixed.fits and not short.fits  # the fewest layers that make it fit
    assert "--n-cpu-moe" in fixed.command and fixed.memory_bytes.host_bytes > plan.memory_bytes.host_bytes


def test_llamacpp_slot_beyond_the_training_context_does_not_fit() -> None:
    plan = make_plan(
        load_model("Qwen/Qwen3-8B"), find_gpu("h100-sxm"), engine="llamacpp", quant="Q4_K_M", context=200_000
    )
    assert not plan.fits and any("capped at the model's training context" in r for r in plan.refusals)


CASES = [
    ("Qwen/Qwen3.5-27B", "rtx4090", e, q, c)
    for e, q in (
        ("vllm", "awq"),
        ("sglang", "awq"),
        ("vllm", "fp8"),
        ("sglang", "bf16"),
        ("llamacpp", "Q4_K_M"),
    )
    for c in (8192, 65536, 262144)
] + [("openai/gpt-oss-20b", "l4", e, None, 131072) for e in ("vllm", "sglang", "llamacpp")]


@pytest.mark.parametrize(("model", "gpu", "engine", "quant", "context"), CASES)
def test_fits_means_no_refusal_and_the_context_served(model, gpu, engine, quant, context) -> None:
    for plan in (
        make_plan(load_model(model), find_gpu(gpu), engine=engine, quant=quant, context=context),
        search_plan(load_model(model), find_gpu(gpu), engine=engine, quant=quant, context=context),
    ):
        assert plan.fits == (not plan.refusals)
        if plan.fits:
            assert plan.context_served >= context
            assert plan.memory_bytes.total <= plan.memory_bytes.capacity
        assert all(r in plan.warnings for r in plan.refusals)
        assert dataclasses.asdict(plan)  # plain data end to end

"""sglang's memory rules (docs/reference/memory.md §2, sglang server_args.py / kv_cache_configurator.py)."""

from __future__ import annotations

import pytest

from servelab.engines.sglang.memory import default_mem_fraction_static, engine_kv_dtype, sglang_memory, tier
from servelab.errors import ConfigError
from tests.unit.plan_models import dense_gqa, mla_moe, qwen35_27b

MIB, GIB = 1024**2, 1024**3


def test_default_mem_fraction_static_on_a_4090() -> None:
    # docs/reference/memory.md §2: 24564 MiB, tp 1: reserved = 512 + 3072 + 48 + 128 = 3760 MiB -> mfs 0.847
    mfs, reserved = default_mem_fraction_static(24564)
    assert reserved == 3760
    assert mfs == 0.847


def test_tiers_by_gpu_memory() -> None:
    assert tier(16 * 1024, 1) == (2048, 8)
    assert tier(24564, 1) == (2048, 24)
    assert tier(49140, 1) == (4096, 32)
    assert tier(81559, 8) == (8192, 512)


def test_big_gpus_reserve_at_least_10_gib() -> None:
    # H100 80 GB (81559 MiB): chunk 8192, graph bs 256: 512 + 12288 + 512 + 128 = 13440 MiB (> the 10240 floor)
    mfs, reserved = default_mem_fraction_static(81559)
    assert reserved == 13440 and mfs == round((81559 - 13440) / 81559, 3)
    # a 64 GiB card with a small chunk would reserve less than 10 GiB: the floor applies
    assert default_mem_fraction_static(65536, chunked_prefill_size=2048)[1] == 10240


def test_speculative_decoding_reserves_2_gib_more() -> None:
    assert default_mem_fraction_static(24564, speculative=True)[1] == 3760 + 2048


def _dense(**kwargs):
    return sglang_memory(dense_gqa(), gpu_memory_bytes=24 * GIB, weights_bytes=16 * GIB, **kwargs)


def test_dense_token_capacity_is_budget_over_cell_size() -> None:
    m = _dense(mem_fraction_static=0.9)
    budget = int(0.9 * 24 * GIB) - 16 * GIB
    assert m.pool_budget_bytes == budget
    assert m.max_total_tokens == budget // 131072
    assert m.mamba_cache_size == 0


def test_max_total_tokens_caps_and_warns_when_larger_than_profiled() -> None:
    assert _dense(mem_fraction_static=0.9, max_total_tokens=1000).max_total_tokens == 1000
    m = _dense(mem_fraction_static=0.9, max_total_tokens=10**9)
    assert m.max_total_tokens < 10**9 and any("larger than the profiled" in w for w in m.warnings)


def test_max_req_len_is_min_of_context_and_capacity_minus_one() -> None:
    # managers/utils.py: max_req_len = min(context_len - 1, max_total_num_tokens - 1)
    m = _dense(mem_fraction_static=0.9, context_length=131072)
    assert m.max_req_len == min(131071, m.max_total_tokens - 1)
    assert any("requests are capped" in r.message for r in m.refusals)


def test_max_running_requests_formula() -> None:
    # min(clamp(int(tokens / context x 512), 2048, 4096), tokens // 2)
    m = _dense(mem_fraction_static=0.9, context_length=4096)
    assert m.max_running_requests == min(
        max(int(m.max_total_tokens / 4096 * 512), 2048), 4096, m.max_total_tokens // 2
    )


def test_hybrid_state_pool_takes_r_over_1_plus_r_of_the_budget() -> None:
    # kv_cache_configurator._handle_max_mamba_cache: mamba budget = rest x 0.9 / 1.9; 146.8 MiB per request
    m = sglang_memory(
        qwen35_27b(),
        gpu_memory_bytes=48 * GIB,
        weights_bytes=17 * GIB,
        mem_fraction_static=0.9,
        kv_cache_dtype="fp8_e5m2",
        context_length=262144,
    )
    per_req = 3_207_168 * 48
    assert m.mamba_state_bytes_per_request == per_req
    assert m.mamba_cache_size == int(m.pool_budget_bytes * 0.9 / 1.9) // per_req
    assert m.max_total_tokens == (m.pool_budget_bytes - m.mamba_cache_size * per_req) // (32 * 1024)
    assert m.max_running_requests <= m.mamba_cache_size // 3


def test_brief_scenario_fits_262144_tokens_on_one_48g_card() -> None:
    # brief step 2: AWQ, --context-length 262144 --max-total-tokens 262144 --kv-cache-dtype fp8_e5m2
    # --mem-fraction-static 0.9 on a 48 GB 4090: fits (AWQ text weights ~17.7 GB incl. bf16 embed/lm_head)
    m = sglang_memory(
        qwen35_27b(),
        gpu_memory_bytes=49140 * MIB,
        free_memory_bytes=49140 * MIB - 512 * MIB,
        weights_bytes=17_741_759_488,
        kv_cache_dtype="fp8_e5m2",
        context_length=262144,
        max_total_tokens=262144,
        mem_fraction_static=0.9,
    )
    assert m.fits and m.max_total_tokens == 262144 and m.max_req_len == 262143


def test_explicit_mamba_cache_size_frees_kv_tokens() -> None:
    kw = dict(
        gpu_memory_bytes=48 * GIB, weights_bytes=17 * GIB, mem_fraction_static=0.9, kv_cache_dtype="fp8_e5m2"
    )
    auto = sglang_memory(qwen35_27b(), **kw)
    small = sglang_memory(qwen35_27b(), max_mamba_cache_size=8, **kw)
    assert small.mamba_cache_size == 8 and small.max_total_tokens > auto.max_total_tokens


def test_mla_cell_size() -> None:
    # DeepSeek: 576 elements per layer per token (docs/reference/memory.md §2)
    m = sglang_memory(mla_moe(), gpu_memory_bytes=141 * GIB, weights_bytes=100 * GIB, kv_cache_dtype="bf16")
    assert m.kv_cell_bytes == 576 * 61 * 2


def test_weights_that_leave_no_room_do_not_fit() -> None:
    m = sglang_memory(dense_gqa(), gpu_memory_bytes=16 * GIB, weights_bytes=16 * GIB)
    assert not m.fits and any("Not enough memory" in r.message for r in m.refusals)


def test_bad_kv_dtype_and_fraction() -> None:
    with pytest.raises(ConfigError, match="fp8_e5m2"):
        _dense(kv_cache_dtype="q4_0")
    with pytest.raises(ConfigError, match="mem-fraction-static"):
        _dense(mem_fraction_static=1.5)
    assert engine_kv_dtype("q8_0")[0] == "fp8_e4m3"


def test_tp_cell_is_the_per_gpu_cell() -> None:
    # model_config.get_num_kv_heads(tp) = max(1, n_kv // tp): with tp 4 each GPU caches 8 / 4 = 2 heads of the
    # Llama-3.1-8B shape, 2 (K,V) x 32 layers x 2 x 128 x 2 bytes = 32,768 B per token (not the whole 131,072)
    kw = dict(gpu_memory_bytes=80 * GIB, weights_bytes=4 * GIB, mem_fraction_static=0.9)
    m = sglang_memory(dense_gqa(), tp=4, **kw)
    assert m.kv_cell_bytes == 2 * 32 * 2 * 128 * 2 == 32768
    assert m.max_total_tokens == (int(0.9 * 80 * GIB) - 4 * GIB) // 32768


def test_tp_beyond_the_kv_heads_replicates_them() -> None:
    # 8 KV heads on 16 GPUs: each GPU keeps one (replicated), so the cell is 1 head, never half a head
    m = sglang_memory(dense_gqa(), tp=16, gpu_memory_bytes=80 * GIB, weights_bytes=1 * GIB)
    assert m.kv_cell_bytes == 2 * 32 * 1 * 128 * 2


def test_tp_leaves_the_mla_latent_whole() -> None:
    m = sglang_memory(
        mla_moe(), tp=8, gpu_memory_bytes=141 * GIB, weights_bytes=90 * GIB, kv_cache_dtype="bf16"
    )
    assert m.kv_cell_bytes == 576 * 61 * 2


def test_mxfp4_experts_are_padded_to_256_on_sm100() -> None:
    """sglang layers/quantization/mxfp4.py on SM100 (flashinfer MXFP4 MoE): I and H rounded up to 256, so
    gpt-oss-20b's 2880 x 2880 experts take 3072 x 3072: 24 layers x 32 experts x 3 x (3072^2 - 2880^2) values
    x 4.25 bits more. The kvcached case (tests/fixtures/real-logs/sglang/gpt-oss-20b-kvcached-weights.yaml) logged
    'mem usage=14.53 GB' on a ~180 GB card; without the padding the plan was 12.81 GiB."""
    from servelab.engines.sglang.weights import mxfp4_moe_padding_bytes
    from servelab.hardware.gpus import find_gpu
    from servelab.model.load import load_model
    from servelab.plan.make import make_plan

    model = load_model("openai/gpt-oss-20b")
    extra = 24 * 32 * 3 * (3072 * 3072 - 2880 * 2880)  # layers x experts x (gate, up, down)
    assert mxfp4_moe_padding_bytes(model, find_gpu("b200")) == int(extra * 4.25 / 8)
    assert mxfp4_moe_padding_bytes(model, find_gpu("h100-sxm")) == 0  # Hopper: triton kernels, unpadded
    blackwell = make_plan(model, find_gpu("b200"), engine="sglang", quant="mxfp4")
    hopper = make_plan(model, find_gpu("h200"), engine="sglang", quant="mxfp4")
    assert blackwell.memory_bytes.weights - hopper.memory_bytes.weights == int(extra * 4.25 / 8)
    assert blackwell.memory_bytes.weights / 2**30 == pytest.approx(14.53, rel=0.05)
    tp2 = mxfp4_moe_padding_bytes(model, find_gpu("b200"), tp=2)  # I = 1440 per GPU -> 1536
    assert tp2 == int(24 * 32 * 3 * (1536 * 3072 - 1440 * 2880) * 4.25 / 8)

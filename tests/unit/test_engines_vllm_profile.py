"""vLLM's profile run per release (servelab/engines/vllm/profile.py; docs/reference/memory.md §3): exact values."""

from __future__ import annotations

import pytest

from servelab.engines.vllm import profile
from servelab.engines.vllm.memory import vllm_memory
from servelab.errors import ConfigError
from servelab.model.catalog import catalog_model

GIB = 1024**3


def test_versions_parse_as_vllm_prints_them() -> None:
    assert profile.parse_version("0.10.1") == (0, 10, 1)
    assert profile.parse_version("v0.26.0") == (0, 26, 0)
    assert profile.parse_version("0.15.2rc1.dev93+g11a4c9d30") == (0, 15, 2)
    assert profile.parse_version(None) == profile.parse_version(profile.CURRENT_VERSION)
    with pytest.raises(ConfigError, match="not a version number"):
        profile.parse_version("latest")


def test_the_forward_peak_per_token_is_the_widest_mlp() -> None:
    llama = catalog_model("meta-llama/Llama-3.1-8B-Instruct")  # H 4096, MLP 14336
    assert profile.forward_bytes_per_token(llama, 1) == 2 * (3 * 14336 + 3 * 4096) == 110_592
    # V0's log: peak_torch 17.06 GiB - weights 14.99 = 2.07 GiB at 20,000 tokens, 2.99 at 29,000
    assert round(20_000 * 110_592 / GIB, 2) == 2.06 and round(29_000 * 110_592 / GIB, 2) == 2.99


def test_a_moe_layer_holds_fused_moe_caches() -> None:
    oss = catalog_model("openai/gpt-oss-20b")  # H 2880, 4 of 32 experts of 2880
    # cache13 [N, k, max(2I, H)] is shared by the gate_up and the down outputs; cache2 [N x k, I] beside it
    assert profile.forward_bytes_per_token(oss, 1) == 2 * (3 * 2880 + 4 * max(2 * 2880, 2880) + 4 * 2880)
    qwen = catalog_model("Qwen/Qwen3-235B-A22B")  # H 4096, 8 of 128 experts of 1536, split over 4 GPUs
    assert profile.forward_bytes_per_token(qwen, 4) == 2 * (3 * 4096 + 8 * 4096 + 8 * 384)


def test_the_sampler_warm_up_sorts_until_the_triton_kernel() -> None:
    oss = catalog_model("openai/gpt-oss-20b")
    rows = 1024
    assert profile.sampler_bytes(oss, rows, (0, 10, 1)) == rows * oss.vocab_size * 40
    assert profile.sampler_bytes(oss, rows, (0, 15, 2)) == rows * oss.vocab_size * 40
    # Triton masks in place: bf16 logits + fp32 copy + fp32 softmax + fp32 exponential noise
    assert profile.sampler_bytes(oss, rows, (0, 16, 0)) == rows * oss.vocab_size * (2 + 4 + 4 + 4)
    # the peak is the larger of the forward and the sampler beside the forward's hidden states
    forward = 8192 * profile.forward_bytes_per_token(oss, 1)
    hidden = 8192 * 2880 * 2
    assert profile.profile_peak_bytes(oss, 8192, 1024, 1, (0, 10, 1)) == hidden + rows * oss.vocab_size * 40
    assert hidden + rows * oss.vocab_size * 40 > forward
    # the dummy batch has min(tokens, max_num_seqs) requests
    assert (
        profile.profile_peak_bytes(oss, 512, 1024, 1, (0, 10, 1))
        == 512 * 2880 * 2 + 512 * oss.vocab_size * 40
    )


def test_defaults_per_engine_generation() -> None:
    assert profile.default_batch((0, 6, 4), 24 * GIB, 20_000) == (256, 20_000)  # V0: max(len, 2048)
    assert profile.default_batch((0, 6, 4), 24 * GIB, 1_000) == (256, 2048)
    assert profile.default_batch((0, 6, 4), 24 * GIB, 35_000) == (256, 512)  # chunked prefill above 32K
    assert profile.default_batch((0, 11, 0), 80 * GIB, 131_072) == (1024, 8192)
    assert profile.default_batch((0, 11, 0), 24 * GIB, 131_072) == (256, 2048)
    # an A100 keeps the small defaults at 80 GB (arg_utils.py: "a100" not in the device name)
    assert profile.default_batch((0, 19, 0), 80 * GIB, 131_072, "NVIDIA A100 80GB SXM") == (256, 2048)
    assert profile.default_batch((0, 19, 0), 80 * GIB, 131_072, "NVIDIA H100 80GB HBM3") == (1024, 8192)
    # a GB10 (DGX Spark, 119.7 GiB) too: NVML reports no memory there, vLLM's device_memory falls back to 0
    # (the 2048-token compile range and the 256-wide FULL graphs its v0.13.0 and v0.18.1 logs print)
    assert profile.default_batch((0, 13, 0), 122583 * 1024**2, 32_768, "NVIDIA GB10 (DGX Spark)") == (
        256,
        2048,
    )


def test_cuda_graphs_leave_the_budget_from_v0_20_until_model_runner_v2() -> None:
    model = catalog_model("meta-llama/Llama-3.1-8B-Instruct")
    kw = {"gpu_memory_bytes": 80 * GIB, "weights_bytes": 16 * GIB, "max_model_len": 8192}
    old = vllm_memory(model, version="0.19.1", **kw)  # type: ignore[arg-type]
    new = vllm_memory(model, version="0.20.0", **kw)  # type: ignore[arg-type]
    v2 = vllm_memory(model, version="0.24.0", **kw)  # type: ignore[arg-type]  # Llama on V2 from v0.24
    assert old.cuda_graph_bytes == new.cuda_graph_bytes == v2.cuda_graph_bytes > 0
    assert old.kv_budget_bytes - new.kv_budget_bytes == new.cuda_graph_bytes
    assert v2.kv_budget_bytes == old.kv_budget_bytes


def test_the_v0_budget_of_the_rtx3090_log() -> None:
    # vllm#10517: 23.58 GiB x 0.90 - peak_torch 17.06 - non-torch 0.35 = 3.81 GiB at max_model_len 20,000
    model = catalog_model("meta-llama/Llama-3.1-8B-Instruct")
    total, weights = int(23.58 * GIB), int(14.9888 * GIB)
    m = vllm_memory(
        model, gpu_memory_bytes=total, weights_bytes=weights, max_model_len=20_000, version="0.6.4"
    )
    assert m.max_num_batched_tokens == 20_000 and m.max_num_seqs == 256
    assert m.activation_bytes == 20_000 * 110_592
    assert m.kv_budget_bytes == int(total * 0.9) - weights - 20_000 * 110_592 - m.non_torch_bytes
    assert abs(m.kv_budget_bytes / GIB - 3.81) / 3.81 < 0.05


def test_marlin_pads_mxfp4_experts_where_triton_kernels_do_not_run() -> None:
    assert profile.marlin_mxfp4("8.0", (0, 19, 0))  # A100: outside SM90-SM100
    assert profile.marlin_mxfp4("12.0", (0, 26, 0))  # RTX 5090
    assert profile.marlin_mxfp4("9.0", (0, 10, 1))  # H100 before triton_kernels shipped
    assert not profile.marlin_mxfp4("9.0", (0, 26, 0))
    assert not profile.marlin_mxfp4(None, (0, 26, 0))
    oss = catalog_model("openai/gpt-oss-120b")  # 36 layers x 128 experts, 2880 -> 3072 x 2944
    extra = 3 * (3072 * 2944 - 2880 * 2880) * 128 * 36
    assert profile.marlin_padding_bytes(oss, 1) == extra * 17 // 32
    assert profile.marlin_padding_bytes(catalog_model("meta-llama/Llama-3.1-8B-Instruct"), 1) == 0


def test_v1_opted_into_on_0_7_takes_its_own_defaults_and_profile() -> None:
    """v0.7.3: VLLM_USE_V1=1 gives max_num_seqs 1024 and 8192 batched tokens on an H100/H200 (2048 elsewhere,
    whatever the memory), and a profile run without a sampler warm-up; without it 0.7 is V0."""
    v07 = profile.parse_version("0.7.3")
    assert not profile.engine_v1(v07) and profile.engine_v1(v07, True)
    assert profile.engine_v1(profile.parse_version("0.8.0")) and not profile.engine_v1((0, 8, 0), False)
    big = 80 * 2**30
    assert profile.default_batch(v07, big, 8192, "NVIDIA H100 80GB HBM3") == (256, 8192)  # V0
    assert profile.default_batch(v07, big, 8192, "NVIDIA H100 80GB HBM3", use_v1=True) == (1024, 8192)
    assert profile.default_batch(v07, big, 8192, "NVIDIA A100-SXM4-80GB", use_v1=True) == (1024, 2048)
    assert profile.default_batch(v07, 24 * 2**30, 8192, "NVIDIA H200", use_v1=True) == (1024, 8192)
    model = catalog_model("meta-llama/Llama-3.1-8B-Instruct")
    v0 = profile.profile_peak_bytes(model, 2048, 256, 1, v07)
    v1 = profile.profile_peak_bytes(model, 2048, 256, 1, v07, use_v1=True)
    forward = 2048 * profile.forward_bytes_per_token(model, 1)
    assert v1 == max(forward, 2048 * model.hidden_size * 2 + 256 * model.vocab_size * 2) < v0

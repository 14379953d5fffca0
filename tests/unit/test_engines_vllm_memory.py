"""vLLM's memory rules against the public validation points of docs/reference/memory.md §9 (V4-V7)."""

from __future__ import annotations

import dataclasses

import pytest

from servelab.engines.vllm import profile
from servelab.engines.vllm.memory import NON_TORCH_BYTES, activation_peak_bytes, engine_kv_dtype, vllm_memory
from servelab.errors import ConfigError
from servelab.hardware.gpus import find_gpu
from servelab.model.load import load_model
from servelab.plan.make import make_plan
from tests.unit.plan_models import dense_gqa, qwen35_27b, sliding_5_to_1

GIB = 1024**3


def _with_kv_budget(model, kv_budget: int, weights: int, **kwargs):
    """vllm_memory on a card sized so that exactly `kv_budget` bytes are left for the KV cache."""
    seqs = kwargs.pop("max_num_seqs", 256)
    act = activation_peak_bytes(model, 2048, seqs, 1)
    total = kv_budget + weights + act + NON_TORCH_BYTES
    return vllm_memory(
        model,
        gpu_memory_bytes=total,
        weights_bytes=weights,
        gpu_memory_utilization=1.0,
        enforce_eager=True,
        max_num_seqs=seqs,
        max_num_batched_tokens=2048,
        **kwargs,
    )


def test_v5_estimated_maximum_model_length() -> None:
    # V5: Qwen3-8B-based, max_model_len 40960 needs 5.62 GiB, 4.50 GiB available ->
    # "the estimated maximum model length is 32768"
    m = _with_kv_budget(dense_gqa(layers=36), int(4.50 * GIB), int(15.27 * GIB), max_model_len=40960)
    assert m.kv_budget_bytes == int(4.50 * GIB)
    assert not m.fits
    assert m.estimated_max_model_len == 32768
    assert any("estimated maximum model length is 32768" in r.message for r in m.refusals)


def test_dense_blocks_are_16_tokens() -> None:
    m = _with_kv_budget(dense_gqa(), 2 * GIB, 16 * GIB, max_model_len=8192)
    assert m.block_size == 16 and m.page_bytes == 16 * 4096 and m.group_size == 32
    assert m.num_blocks == 2 * GIB // (16 * 4096 * 32)
    assert m.kv_tokens == m.num_blocks * 16
    assert m.max_concurrency == pytest.approx(m.num_blocks / 512)


def test_v4_hybrid_block_size_and_padding_on_a_5090() -> None:
    # V4/V6: Qwen3.5-27B + MTP on an RTX 5090, fp8 KV: "attention block size 1,600 tokens",
    # "Add 3 padding layers, may waste at most 6.25%" (48 GDN + 17 attention -> 4 groups of 17);
    # 9.28 GiB available serves 262,144 tokens; with prefix caching (mamba_cache_mode 'align') it needs 9.29 GiB
    # and "the estimated maximum model length is 260800". Only 3 speculative tokens give both figures: the GDN page
    # 10,240 x (3 + 3) x 2 + 3,145,728 B fills 1,596 tokens of 2,048 B -> 1,600 at SM120's alignment of 16, and a
    # request takes 164 + 3 x (2 + 3) = 179 blocks of 1,600 x 2,048 x 17 B = 9.287 GiB.
    model = dataclasses.replace(qwen35_27b(), weights=())
    common = dict(
        kv_cache_dtype="fp8", speculative_tokens=3, draft_layers=1, max_model_len=262144, max_num_seqs=64
    )
    m = _with_kv_budget(model, int(9.28 * GIB), int(18.19 * GIB), **common)
    assert m.block_size == 1600
    assert (m.group_size, m.num_groups, m.padding_layers) == (17, 4, 3)
    assert any("6.25%" in w for w in m.warnings)
    assert m.blocks_per_request == 164 + 3 * (1 + 3)
    assert m.fits and m.estimated_max_model_len == 262144
    aligned = _with_kv_budget(model, int(9.28 * GIB), int(18.19 * GIB), enable_prefix_caching=True, **common)
    assert aligned.blocks_per_request == 179
    assert not aligned.fits and aligned.estimated_max_model_len == 260800
    assert any("(9.29 GiB KV cache is needed" in r.message for r in aligned.refusals)


def test_hybrid_max_num_seqs_beyond_mamba_blocks_is_flagged() -> None:
    # V7: "max_num_seqs (256) exceeds available Mamba cache blocks (N)"
    model = dataclasses.replace(qwen35_27b(), weights=())
    # raised only when full CUDA graphs are captured: the eager launch starts with the same pool
    eager = _with_kv_budget(model, 2 * GIB, 17 * GIB, kv_cache_dtype="fp8", max_model_len=32768)
    assert eager.mamba_blocks == eager.num_blocks < 256 and eager.fits
    m = vllm_memory(
        model,
        gpu_memory_bytes=80 * GIB,
        weights_bytes=17 * GIB,
        kv_cache_memory_bytes=2 * GIB,
        kv_cache_dtype="fp8",
        max_model_len=32768,
        max_num_seqs=256,
        max_num_batched_tokens=2048,
    )
    assert m.mamba_blocks == m.num_blocks == eager.num_blocks
    assert not m.fits
    assert any(f"exceeds available Mamba cache blocks ({m.num_blocks})" in r.message for r in m.refusals)


def test_sliding_groups_need_only_the_window() -> None:
    model = sliding_5_to_1()
    short = _with_kv_budget(model, 4 * GIB, 50 * GIB, max_model_len=131072)
    # 10 full layers form one group; 52 sliding layers fill 6 groups of 10 (8 padding layers); a sliding group
    # holds the window - 1 + max_num_batched_tokens (2048) tokens, plus one block (SlidingWindowSpec)
    assert (short.group_size, short.num_groups, short.padding_layers) == (10, 7, 8)
    assert short.blocks_per_request == 131072 // 16 + 6 * (-(-(1023 + 2048) // 16) + 1)


def test_longer_than_the_model_warns() -> None:
    m = _with_kv_budget(dense_gqa(max_context=8192), GIB, GIB, max_model_len=16384)
    assert any("VLLM_ALLOW_LONG_MAX_MODEL_LEN" in r.message for r in m.refusals)


def test_bad_utilization_and_kv_dtype() -> None:
    with pytest.raises(ConfigError, match="gpu-memory-utilization"):
        vllm_memory(dense_gqa(), gpu_memory_bytes=GIB, weights_bytes=0, gpu_memory_utilization=0)
    with pytest.raises(ConfigError, match="fp8_e5m2"):
        vllm_memory(dense_gqa(), gpu_memory_bytes=GIB, weights_bytes=0, kv_cache_dtype="q8_0")
    assert engine_kv_dtype("bf16") == ("bfloat16", None)


def test_max_num_batched_tokens_sizes_the_profile_peak() -> None:
    m = vllm_memory(
        dense_gqa(),
        gpu_memory_bytes=80 * GIB,
        weights_bytes=16 * GIB,
        max_model_len=8192,
        max_num_batched_tokens=4096,
        max_num_seqs=64,
    )
    assert m.activation_bytes == activation_peak_bytes(dense_gqa(), 4096, 64, 1)
    assert (m.max_num_batched_tokens, m.max_num_seqs) == (4096, 64)


def test_new_vllm_settings_reach_the_command_line() -> None:
    from servelab.hardware.gpus import find_gpu
    from servelab.model.load import load_model
    from servelab.plan.make import make_plan

    plan = make_plan(
        load_model("meta-llama/Llama-3.1-8B-Instruct"),
        find_gpu("h100-sxm"),
        engine="vllm",
        context=16384,
        max_num_seqs=64,
        max_num_batched_tokens=4096,
        kv_cache_memory_bytes=8 * GIB,
    )
    words = plan.command_line.split()
    assert words[words.index("--max-num-seqs") + 1] == "64"
    assert words[words.index("--max-num-batched-tokens") + 1] == "4096"
    assert words[words.index("--kv-cache-memory-bytes") + 1] == str(8 * GIB)
    assert plan.details["kv_budget_bytes"] == 8 * GIB and plan.fits


def test_the_vision_encoder_profile_is_the_peak_of_a_vision_language_checkpoint() -> None:
    """profile_run runs the Qwen-VL tower on max-size dummy images before the text forward (gpu_model_runner.py):
    at one sequence the sampler term vanishes and the tower's MLP over 65,536 patch tokens is the peak; served as
    text only (--language-model-only) the peak is the text forward's again."""
    qwen = load_model("Qwen/Qwen3.5-35B-A3B")
    vision = qwen.vision
    assert vision is not None and vision.merge == 2 and vision.patch_values == 3 * 2 * 16 * 16
    peak, outputs = profile.encoder_profile(qwen, 8192, 1, 1, 131072)
    n = profile.QWEN_VL_MAX_IMAGE_TOKENS * 4  # one item: 16,384 merged tokens of 2 x 2 patches
    assert peak == 2 * n * (vision.patch_values + 2 * vision.width + 2 * vision.intermediate)
    assert outputs == 2 * profile.QWEN_VL_MAX_IMAGE_TOKENS * vision.out_hidden
    text = activation_peak_bytes(qwen, 8192, 1, 1, multimodal=False)
    assert text < peak == activation_peak_bytes(qwen, 8192, 1, 1, max_model_len=131072)
    assert activation_peak_bytes(dataclasses.replace(qwen, vision=None), 8192, 1, 1) == text
    assert activation_peak_bytes(qwen, 8192, 1, 1, "0.8.0") > text  # V1, the default engine from 0.8.0
    assert activation_peak_bytes(qwen, 8192, 1, 1, "0.7.3") == text  # V0's multimodal profile is not modelled


def test_the_encoder_profile_batches_items_by_the_encoder_budget_and_splits_by_tp() -> None:
    """The encoder budget is max(max_num_batched_tokens, tokens per item): 40,000 batched tokens profile two
    16,384-token items, capped by what the sequences can hold; tensor parallel splits the tower's MLP."""
    qwen = load_model("Qwen/Qwen3.5-35B-A3B")
    tokens = profile.QWEN_VL_MAX_IMAGE_TOKENS
    assert profile.encoder_items(tokens, 8192, 256, 262144) == 1
    assert profile.encoder_items(tokens, 40000, 256, 262144) == 2
    assert profile.encoder_items(tokens, 40000, 1, 8192) == 1  # one sequence of one item
    one, _ = profile.encoder_profile(qwen, 8192, 256, 1, 262144)
    two, outputs = profile.encoder_profile(qwen, 40000, 256, 1, 262144)
    assert two == 2 * one and outputs == 2 * 2 * tokens * qwen.hidden_size
    split, _ = profile.encoder_profile(qwen, 8192, 256, 4, 262144)
    assert split < one and one - split == 2 * tokens * 4 * 2 * (
        qwen.vision.intermediate - qwen.vision.intermediate // 4
    )
    assert profile.encoder_profile(load_model("google/gemma-3-27b-it"), 8192, 256, 1, 8192) == (0, 0)


def test_language_model_only_is_read_from_the_launch_and_emitted() -> None:
    from servelab.engines.vllm import cmdline

    for words in (["--language-model-only"], ["--limit-mm-per-prompt", '{"image": 0, "video": 0}']):
        launch = cmdline.parse(["vllm", "serve", "Qwen/Qwen3.5-27B", *words])
        assert launch.text_only and cmdline.plan_settings(launch).engine.language_model_only is True
    kept = cmdline.parse(["vllm", "serve", "m", "--limit-mm-per-prompt", '{"image": 2, "audio": 0}'])
    assert not kept.text_only and cmdline.plan_settings(kept).engine.language_model_only is False
    qwen, card = load_model("Qwen/Qwen3.5-27B"), find_gpu("rtx5090")
    full = make_plan(qwen, card, engine="vllm", quant="awq", context=32768, max_num_seqs=4)
    text = make_plan(
        qwen, card, engine="vllm", quant="awq", context=32768, max_num_seqs=4, language_model_only=True
    )
    assert text.details["kv_budget_bytes"] > full.details["kv_budget_bytes"]
    assert "--language-model-only" in text.command and "--language-model-only" not in full.command

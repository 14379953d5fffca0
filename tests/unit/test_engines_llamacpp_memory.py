"""llama.cpp allocation rules against llama-server's own log lines and hand-computed values.

Log figures: docs/reference/llamacpp-local.md §2 (llama.cpp b1-0c1e570 vendored in llama-cpp-python 0.3.36, CPU
build, run on this machine 2026-11-30 with random-weight GGUFs of the stated shapes)."""

from __future__ import annotations

import pytest

from servelab.engines.llamacpp.memory import engine_kv_dtype, llamacpp_memory, max_context_that_fits
from servelab.errors import ConfigError
from servelab.model.load import load_model
from servelab.model.spec import AttentionSpec, LayerKind, LinearAttentionSpec, ModelSpec, WeightGroup
from tests.unit.plan_models import dense_gqa, mla_moe, qwen35_27b, sliding_5_to_1

MIB = 1024**2


def tiny_hybrid(vocab: int = 512, state_dim: int = 16, value_heads: int = 4) -> ModelSpec:
    """The 8-layer qwen35 test model of docs/reference/llamacpp-local.md §2: full attention every 4th layer (2 KV heads x 32),
    GDN head dim 16 with 2 key / 4 value heads, conv kernel 4; 128 wide, FFN 256, f32 weights."""
    kinds = tuple(
        LayerKind.FULL_ATTENTION if (i + 1) % 4 == 0 else LayerKind.LINEAR_ATTENTION for i in range(8)
    )
    kv = tuple(2 if k == LayerKind.FULL_ATTENTION else 0 for k in kinds)
    return ModelSpec(
        name="tiny",
        architecture="qwen35",
        source="gguf",
        hidden_size=128,
        vocab_size=vocab,
        layer_kinds=kinds,
        kv_heads_per_layer=kv,
        attention=AttentionSpec(4, 2, 32),
        max_context=4096,
        intermediate_size=256,
        dtype="fp32",
        linear_attention=LinearAttentionSpec(2, value_heads, state_dim, state_dim, 4),
        weights=(WeightGroup("text", 1_000_000, 4_000_000, "F32"),),
        weights_exact=True,
    )


def test_log_buffers_of_the_8_layer_hybrid() -> None:
    # -c 8192 -np 4: "KV buffer size = 4.00 MiB", "RS buffer size = 0.13 MiB", "compute buffer size = 4.27 MiB",
    # "n_ctx_seq = 2048", "(2048 cells, 2 layers, 4/4 seqs)", R 0.04 MiB + S 0.09 MiB
    m = llamacpp_memory(tiny_hybrid(), n_ctx=8192, n_parallel=4)
    assert m.kv_bytes == 4 * MIB
    assert (m.n_ctx, m.n_ctx_seq, m.kv_cells, m.n_ctx_per_slot) == (8192, 2048, 2048, 2048)
    assert m.recurrent_bytes == 6 * 4 * (3 * 128 * 4 + 4 * 16 * 16 * 4)  # 135,168 B = 0.13 MiB
    assert m.recurrent_bytes / MIB == pytest.approx(0.13, abs=0.005)
    assert m.compute_bytes / MIB == pytest.approx(4.27, rel=0.25)
    assert m.output_bytes == 512 * 4 * 4


@pytest.mark.parametrize(
    ("flags", "compute_mib"),
    [
        # recorded with /tmp calibration runs of the same build (shape in each case), see docs/planning.md
        (
            {"n_ctx": 16384, "n_parallel": 1, "flash_attn": False},
            163.01,
        ),  # llama 4 x 256, 4 heads, vocab 32000
        ({"n_ctx": 4096, "n_parallel": 1}, 10.51),
    ],
)
def test_compute_buffer_against_recorded_logs(flags: dict, compute_mib: float) -> None:
    model = dense_gqa(layers=4, kv_heads=2, head_dim=64, vocab=32000, hidden=256)
    model = ModelSpec(**{**model.__dict__, "attention": AttentionSpec(4, 2, 64), "intermediate_size": 768})
    assert llamacpp_memory(model, **flags).compute_bytes / MIB == pytest.approx(compute_mib, rel=0.25)


def test_compute_buffer_of_a_wide_state_hybrid() -> None:
    # same build, the 8-layer hybrid with GDN head dim 64 and 8 value heads (servelab.modelmake shape
    # "wide-hybrid"), -c 2048 -np 1: "CPU compute buffer size = 7.29 MiB", "RS buffer size = 0.80 MiB"
    m = llamacpp_memory(tiny_hybrid(state_dim=64, value_heads=8), n_ctx=2048, n_parallel=1)
    assert m.compute_bytes / MIB == pytest.approx(7.29, rel=0.25)
    assert m.recurrent_bytes / MIB == pytest.approx(0.80, abs=0.005)


def test_n_ctx_is_padded_to_256_and_split_per_slot() -> None:
    m = llamacpp_memory(dense_gqa(), n_ctx=10_000, n_parallel=3)
    assert m.n_ctx_seq == 3584  # pad(10240 / 3 = 3413, 256)
    assert m.n_ctx == 3 * 3584
    assert any("rounded" in w for w in m.warnings)
    assert any("each slot 3584 tokens" in w for w in m.warnings)


def test_unified_cache_lets_every_slot_use_the_whole_window() -> None:
    m = llamacpp_memory(dense_gqa(), n_ctx=32768, n_parallel=4, kv_unified=True)
    assert (m.n_ctx_seq, m.n_ctx_per_slot) == (32768, 32768)
    assert m.kv_bytes == 32768 * 131072
    assert not any("each slot" in w for w in m.warnings)


def test_auto_parallel_is_four_unified_slots() -> None:
    # llama.cpp tools/server/server.cpp: "n_parallel is set to auto, using n_parallel = 4 and kv_unified = true"
    m = llamacpp_memory(dense_gqa(), n_ctx=8192)
    assert (m.n_parallel, m.kv_unified, m.n_ctx_per_slot) == (4, True, 8192)


def test_field_report_trap_262144_with_np_4() -> None:
    # brief step 6: -c 262144 -np 4 silently gave each slot a quarter of the context
    m = llamacpp_memory(qwen35_27b(), n_ctx=262144, n_parallel=4, cache_type_k="q8_0", cache_type_v="q8_0")
    assert m.n_ctx_per_slot == 65536
    assert any("65536" in w for w in m.warnings)


def test_slot_context_is_capped_at_the_training_context() -> None:
    # docs/reference/memory.md §9 V12: "the slot context (131072) exceeds the training context of the model (32768) - capping"
    model = dense_gqa(max_context=32768)
    m = llamacpp_memory(model, n_ctx=131072, n_parallel=1)
    assert m.n_ctx_per_slot == 32768 and m.kv_bytes == 131072 * 131072
    assert any("exceeds the training context" in w for w in m.warnings)


def test_zero_context_means_the_training_context() -> None:
    assert llamacpp_memory(dense_gqa(max_context=8000), n_ctx=0, n_parallel=1).n_ctx == 8192


def test_v1_q4_0_kv_slope_is_18_kib_per_token() -> None:
    # docs/reference/memory.md §9 V1: Qwen3.5-27B with q4_0 KV grows ~18 KiB per token of context (16 full layers only)
    small = llamacpp_memory(qwen35_27b(), n_ctx=2048, n_parallel=1, cache_type_k="q4_0", cache_type_v="q4_0")
    big = llamacpp_memory(qwen35_27b(), n_ctx=131072, n_parallel=1, cache_type_k="q4_0", cache_type_v="q4_0")
    assert (big.kv_bytes - small.kv_bytes) / (131072 - 2048) == 18 * 1024
    # and the measured VRAM growth 2K -> 128K was 2,474 MB (within 10%)
    assert (big.kv_bytes - small.kv_bytes) / 1e6 == pytest.approx(2474, rel=0.10)


def test_recurrent_state_scales_with_slots() -> None:
    # docs/reference/memory.md §5: 149.6 MiB per sequence in llama.cpp (f32), x4 with -np 4
    m = llamacpp_memory(qwen35_27b(), n_ctx=8192, n_parallel=4)
    assert m.recurrent_bytes / MIB == pytest.approx(4 * 149.6, abs=0.2)


def test_sliding_window_cells() -> None:
    # llama-kv-cache-iswa.cpp: size_swa = pad(min(n_ctx_seq, n_swa * 1 + n_ubatch), 256)
    m = llamacpp_memory(sliding_5_to_1(), n_ctx=65536, n_parallel=1)
    per_layer = 2 * 16 * 128 * 2
    assert m.kv_bytes == 10 * per_layer * 65536 + 52 * per_layer * 1536


def test_mla_keeps_only_k() -> None:
    m = llamacpp_memory(mla_moe(), n_ctx=4096, n_parallel=1)
    assert m.kv_bytes == 4096 * 61 * 576 * 2


def test_partial_offload_splits_layers_between_gpu_and_host() -> None:
    """-ngl 17 of 32 layers: the output layer first, then the last 16 repeating layers (current builds); the
    builds before b7470 offloaded the last 17 repeating layers and kept the output layer on the host."""
    model = dense_gqa()
    full = llamacpp_memory(model, n_ctx=8192, n_parallel=1)
    half = llamacpp_memory(model, n_ctx=8192, n_parallel=1, n_gpu_layers=17)
    assert model.num_layers == 32 and half.n_gpu_layers == 16
    assert half.kv_gpu_bytes == full.kv_bytes // 2
    assert half.output_on_gpu and full.output_on_gpu
    assert half.model_gpu_bytes < full.model_gpu_bytes
    assert half.host_bytes > full.host_bytes
    early = llamacpp_memory(model, n_ctx=8192, n_parallel=1, n_gpu_layers=16, output_first=False)
    assert early.kv_gpu_bytes == half.kv_gpu_bytes and not early.output_on_gpu
    assert early.model_gpu_bytes < half.model_gpu_bytes  # the same layers, less the output layer


def test_quantized_v_needs_flash_attention() -> None:
    with pytest.raises(ConfigError, match="flash attention"):
        llamacpp_memory(dense_gqa(), n_ctx=4096, cache_type_v="q8_0", flash_attn=False)


def test_unknown_cache_type_names_the_choices() -> None:
    with pytest.raises(ConfigError, match="q4_0"):
        llamacpp_memory(dense_gqa(), n_ctx=4096, cache_type_k="fp8")
    assert engine_kv_dtype("fp8_e5m2")[0] == "q8_0"


def test_max_context_that_fits_is_monotone_in_the_budget() -> None:
    model = dense_gqa()
    small = max_context_that_fits(model, 20 * 1024**3, n_parallel=1)
    big = max_context_that_fits(model, 24 * 1024**3, n_parallel=1)
    assert 0 < small < big and small % 256 == 0
    assert llamacpp_memory(model, n_ctx=small, n_parallel=1).gpu_bytes <= 20 * 1024**3


def test_v10_ternary_27b_on_a_12_gib_card() -> None:
    # docs/reference/memory.md §9 V10: Ternary-Bonsai-2-27B PTQ1_0, n_ctx 8192, 1 slot: 7,226 MiB in total, of which the mmproj
    # (vision, not planned for llama.cpp) is ~600 MiB -> ~6,626 MiB for the text model; within 10%
    from servelab.hardware.gpus import with_overrides
    from servelab.model.load import load_model
    from servelab.plan.make import make_plan

    model = load_model("Qwen/Qwen3.5-27B", quant="PTQ1_0")
    card = with_overrides(None, vram_gib=12, bandwidth_gb_s=500)
    plan = make_plan(model, card, engine="llamacpp", context=8192)
    assert plan.fits
    assert plan.memory_bytes.total / MIB == pytest.approx(7226 - 600, rel=0.10)


def test_n_cpu_moe_moves_the_routed_experts_of_the_first_layers_to_host() -> None:
    # --n-cpu-moe N / -ot exps=CPU (common/arg.cpp): the ffn_*_exps tensors of N layers leave the GPU buffer
    from servelab.engines.llamacpp.memory import routed_expert_bytes_per_layer
    from servelab.model.load import load_model

    moe = load_model("Qwen/Qwen3-30B-A3B", quant="Q4_K_M")
    text = moe.weight_group("text")
    assert text is not None and text.active_bytes is not None and moe.moe is not None
    idle = text.bytes - text.active_bytes  # the experts a token does not touch: (1 - 8/128) of them
    per_layer = routed_expert_bytes_per_layer(moe)
    assert per_layer == int(idle / (1 - 8 / 128)) // 48
    base = llamacpp_memory(moe, n_ctx=8192, n_parallel=1)
    some = llamacpp_memory(moe, n_ctx=8192, n_parallel=1, n_cpu_moe=10)
    every = llamacpp_memory(moe, n_ctx=8192, n_parallel=1, n_cpu_moe=48)
    assert base.model_gpu_bytes - some.model_gpu_bytes == some.experts_host_bytes == 10 * per_layer
    assert every.experts_host_bytes == 48 * per_layer
    assert some.host_bytes - base.host_bytes == 10 * per_layer
    dense = llamacpp_memory(dense_gqa(), n_ctx=8192, n_parallel=1, n_cpu_moe=10)
    assert dense.experts_host_bytes == 0  # no experts to move


def test_ubatch_sizes_the_compute_buffer() -> None:
    from servelab.engines.llamacpp.compute import compute_bytes

    model = dense_gqa()
    for ub in (256, 512, 2048):
        m = llamacpp_memory(model, n_ctx=8192, n_parallel=1, n_ubatch=ub, n_batch=2048)
        assert m.compute_bytes == compute_bytes(model, n_tokens=ub, n_outputs=1, n_kv=8192, flash_attn=True)
    # -b below -ub: llama.cpp clamps n_ubatch to n_batch
    low = llamacpp_memory(model, n_ctx=8192, n_parallel=1, n_ubatch=2048, n_batch=256)
    assert low.compute_bytes == llamacpp_memory(model, n_ctx=8192, n_parallel=1, n_ubatch=256).compute_bytes
    with pytest.raises(ConfigError, match="-ub"):
        llamacpp_memory(model, n_ubatch=0)


def test_new_llamacpp_settings_reach_the_command_line() -> None:
    from servelab.hardware.gpus import find_gpu
    from servelab.model.load import load_model
    from servelab.plan.make import make_plan

    moe, card = load_model("Qwen/Qwen3-30B-A3B"), find_gpu("rtx4090")
    plan = make_plan(
        moe, card, engine="llamacpp", quant="Q4_K_M", context=8192, n_batch=1024, n_ubatch=256, n_cpu_moe=12
    )
    words = plan.command_line.split()
    assert words[words.index("-b") + 1] == "1024" and words[words.index("-ub") + 1] == "256"
    assert words[words.index("--n-cpu-moe") + 1] == "12"
    every = make_plan(moe, card, engine="llamacpp", quant="Q4_K_M", context=8192, cpu_moe=True)
    assert "-ot exps=CPU" in every.command_line and "--n-cpu-moe" not in every.command_line
    from servelab.engines.llamacpp.memory import routed_expert_bytes_per_layer

    per_layer = routed_expert_bytes_per_layer(load_model("Qwen/Qwen3-30B-A3B", quant="Q4_K_M"))
    assert every.details["experts_host_bytes"] == 48 * per_layer > 0
    assert plan.details["experts_host_bytes"] == 12 * per_layer


def test_flash_attention_off_adds_the_f32_scores_over_the_slot_cells() -> None:
    """llama.cpp PR #8035's 80-layer Llama-3 70B, -c 8192, -ub 512, -fa off: 'CUDA0 compute buffer size = 1108.50
    MiB' (tests/fixtures/real-logs/llamacpp/llama-3-70b-2gpu-4060ti-3060-split.yaml); the scores alone are
    64 heads x 8192 cells x 512 tokens x 4 B = 1 GiB."""
    from servelab.engines.llamacpp.compute import GRAPH_OVERHEAD_BYTES, attention_scores_bytes, mask_bytes

    model = dense_gqa(layers=80, hidden=8192)
    model = ModelSpec(
        **{**model.__dict__, "attention": AttentionSpec(64, 8, 128), "intermediate_size": 28672}
    )
    assert attention_scores_bytes(model, n_tokens=512, n_kv=8192) == 64 * 8192 * 512 * 4
    assert mask_bytes(model, n_tokens=512, n_kv=8192, flash_attn=False) == 8192 * 512 * 4
    assert mask_bytes(model, n_tokens=512, n_kv=8192, flash_attn=True) == 8192 * 512 * 2
    off = llamacpp_memory(model, n_ctx=8192, n_parallel=1, flash_attn=False, n_gpu_layers=78)
    hidden, qkv = 8192 * 512 * 4, (2 * 64 + 2 * 8) * 128 * 512 * 4
    assert off.compute_bytes == 2 * hidden + qkv + 2**30 + 8192 * 512 * 4 + GRAPH_OVERHEAD_BYTES
    assert off.compute_bytes / MIB == pytest.approx(1108.50, rel=0.01)
    on = llamacpp_memory(model, n_ctx=8192, n_parallel=1, flash_attn=True, n_gpu_layers=78)
    assert on.compute_bytes == 2 * hidden + 3 * 28672 * 512 * 4 + 8192 * 512 * 2 + GRAPH_OVERHEAD_BYTES
    # 4 slots without --kv-unified: each stream sees 2048 cells, so the scores are a quarter
    quarter = llamacpp_memory(model, n_ctx=8192, n_parallel=4, flash_attn=False)
    assert quarter.compute_bytes < off.compute_bytes / 3


def test_pipeline_parallelism_keeps_four_copies_of_the_graph_inputs_on_each_gpu() -> None:
    """ggml_backend_sched with pipeline parallelism (several GPUs, every layer offloaded, no tensor override):
    GGML_SCHED_MAX_COPIES = 4 copies of the hidden-state input and the mask per device."""
    model = dense_gqa()
    one = llamacpp_memory(model, n_ctx=8192, n_parallel=1)
    two = llamacpp_memory(model, n_ctx=8192, n_parallel=1, n_devices=2)
    assert two.compute_bytes - one.compute_bytes == 3 * (4096 * 512 * 4 + 8192 * 512 * 2)
    partial = llamacpp_memory(model, n_ctx=8192, n_parallel=1, n_devices=2, n_gpu_layers=32)
    assert partial.compute_bytes == one.compute_bytes  # the output layer on the host: no pipeline


def test_the_mask_is_freed_before_the_logits_unless_a_pipeline_keeps_its_copies() -> None:
    """ggml-alloc frees a tensor after its last consumer unless it is flagged output (ggml-alloc.c
    ggml_gallocr_free_node): on one device the KQ mask is gone once the last layer's attention has run, so a
    logits-bound graph holds the hidden state and the logits only. With pipeline parallelism the scheduler
    flags every input copy output (ggml-backend.cpp, n_copies > 1), so the mask and its copies stay to the end."""
    from servelab.engines.llamacpp.compute import GRAPH_OVERHEAD_BYTES

    model = load_model("Qwen/Qwen3.5-35B-A3B")  # vocab 248,320: the 512 logits rows are the peak
    hidden, logits = model.hidden_size * 512 * 4, model.vocab_size * 512 * 4
    mask = 131072 * 512 * 2  # -c 131072, flash attention on: f16 [n_kv, n_tokens], 128 MiB
    old = dict(n_ctx=131072, n_parallel=1, n_outputs_max=512)
    one = llamacpp_memory(model, **old)  # type: ignore[arg-type]
    assert one.compute_bytes == hidden + logits + GRAPH_OVERHEAD_BYTES
    two = llamacpp_memory(model, n_devices=2, **old)  # type: ignore[arg-type]
    assert two.compute_bytes == hidden + logits + 4 * mask + 3 * hidden + GRAPH_OVERHEAD_BYTES


def test_the_vision_tower_is_not_in_the_gguf() -> None:
    """llama-server loads a vision tower only from a separate --mmproj file: the model buffers leave it out."""
    text = dense_gqa()
    with_vision = ModelSpec(
        **{
            **text.__dict__,
            "weights": (*text.weights, WeightGroup("vision", 400_000_000, 800_000_000, "bf16")),
        }
    )
    a = llamacpp_memory(text, n_ctx=4096, n_parallel=1)
    b = llamacpp_memory(with_vision, n_ctx=4096, n_parallel=1)
    assert (b.model_bytes, b.model_gpu_bytes, b.host_bytes) == (
        a.model_bytes,
        a.model_gpu_bytes,
        a.host_bytes,
    )


def test_flash_attention_modes() -> None:
    from servelab.engines.llamacpp.memory import flash_attn_on

    assert (flash_attn_on("on"), flash_attn_on("off"), flash_attn_on("AUTO"), flash_attn_on(None)) == (
        True,
        False,
        True,
        True,
    )
    with pytest.raises(ConfigError, match="-fa 'maybe' is not a mode"):
        flash_attn_on("maybe")


def test_flash_attention_and_separate_v_type_reach_the_plan_and_the_command() -> None:
    from servelab.hardware.gpus import find_gpu
    from servelab.model.load import load_model
    from servelab.plan.make import make_plan

    model, card = load_model("meta-llama/Llama-3.1-8B"), find_gpu("rtx4090")
    off = make_plan(model, card, engine="llamacpp", quant="Q4_K_M", context=8192, flash_attn="off")
    on = make_plan(model, card, engine="llamacpp", quant="Q4_K_M", context=8192)
    assert (
        off.command[off.command.index("-fa") + 1] == "off" and on.command[on.command.index("-fa") + 1] == "on"
    )
    from servelab.engines.llamacpp.compute import compute_bytes

    for plan, fa in ((off, False), (on, True)):  # the planner hands -fa to the rule
        assert plan.details["compute_buffer_bytes"] == compute_bytes(
            model, n_tokens=512, n_outputs=1, n_kv=8192, flash_attn=fa
        )
    assert off.details["compute_buffer_bytes"] > 32 * 8192 * 512 * 4  # the 512 MiB of scores
    mixed = make_plan(
        model, card, engine="llamacpp", quant="Q4_K_M", context=8192, kv_dtype="q8_0", kv_dtype_v="q4_0"
    )
    assert mixed.command[mixed.command.index("-ctk") + 1] == "q8_0"
    assert mixed.command[mixed.command.index("-ctv") + 1] == "q4_0"
    same = make_plan(model, card, engine="llamacpp", quant="Q4_K_M", context=8192, kv_dtype="q8_0")
    assert mixed.memory_bytes.kv_cache < same.memory_bytes.kv_cache
    auto = make_plan(model, card, engine="llamacpp", quant="Q4_K_M", context=8192, flash_attn="auto")
    assert auto.command[auto.command.index("-fa") + 1] == "auto"
    assert any("-fa auto planned as on" in w for w in auto.warnings)
    refused = make_plan(
        model, card, engine="llamacpp", quant="Q4_K_M", context=8192, kv_dtype="q8_0", flash_attn="off"
    )
    assert not refused.fits and "requires Flash Attention" in refused.warnings[0]


def test_older_builds_reserve_the_logits_of_every_token() -> None:
    """Builds before n_outputs_max reserve the pp graph with n_outputs = n_tokens (graph_reserve(n_tokens, n_seqs,
    n_tokens)): the f32 logits of the whole ubatch join the buffer; the current server reserves n_parallel rows."""
    from servelab.model.load import load_model

    model = load_model("Qwen/Qwen3.5-35B-A3B")  # vocab 248,320: the logits dominate with flash attention on
    now = llamacpp_memory(model, n_ctx=4096, n_parallel=4, kv_unified=True)
    old = llamacpp_memory(model, n_ctx=4096, n_parallel=4, kv_unified=True, n_outputs_max=512)
    assert old.compute_bytes > model.vocab_size * 512 * 4 > 5 * now.compute_bytes
    assert (
        old.compute_bytes
        == llamacpp_memory(model, n_ctx=4096, n_parallel=4, kv_unified=True, n_outputs_max=4096).compute_bytes
    )  # capped at the ubatch's tokens
    assert now.output_bytes == old.output_bytes  # the host output buffer does not change


def test_mla_attention_holds_the_absorbed_query_not_the_decompressed_heads() -> None:
    """DeepSeek-V3 under MLA (src/models/deepseek2.cpp): q_nope absorbed through wk_b into the 512-wide latent,
    the roped q_pe (64) and their concat Qcur (576), per head and token, f32, live together; the GQA rule would
    count q/k/v of 128 decompressed 192-wide heads instead. Flash attention on, the current build's f16 mask."""
    from servelab.engines.llamacpp.compute import GRAPH_OVERHEAD_BYTES, mla_query_bytes

    model = load_model("deepseek-ai/DeepSeek-V3")
    assert model.mla is not None and model.attention is not None
    heads, latent, rope = model.attention.num_heads, model.mla.kv_lora_rank, model.mla.qk_rope_head_dim
    assert mla_query_bytes(model, 512) == heads * (latent + rope + latent + rope) * 512 * 4  # 288 MiB
    gqa = ModelSpec(**{**model.__dict__, "mla": None})
    assert mla_query_bytes(gqa, 512) == 0
    m = llamacpp_memory(model, n_ctx=32768, n_parallel=1)
    hidden = model.hidden_size * 512 * 4
    assert (
        m.compute_bytes == 2 * hidden + mla_query_bytes(model, 512) + 32768 * 512 * 2 + GRAPH_OVERHEAD_BYTES
    )
    assert m.compute_bytes != llamacpp_memory(gqa, n_ctx=32768, n_parallel=1).compute_bytes
    # the absorbed query grows with the ubatch, token for token
    quarter = llamacpp_memory(model, n_ctx=32768, n_parallel=1, n_ubatch=128)
    assert quarter.compute_bytes == (
        2 * hidden // 4 + mla_query_bytes(model, 128) + 32768 * 128 * 2 + GRAPH_OVERHEAD_BYTES
    )


def test_mla_flash_attention_on_an_early_2025_cpu_build() -> None:
    """llama.cpp PR #12227 (jukofyork, 2025-03-06): DeepSeek V3, CPU backend, -c 32768, -ub 512, -fa on: 'CPU
    compute buffer size = 430.01 MiB' (tests/fixtures/real-logs/llamacpp/deepseek-v3-cpu-mla-fa-32k.yaml). The
    build reserves every token's logits (before b9460) and the f32 mask beside its f16 cast (before b9410); the
    peak is the MLA layer: 2 hidden + 288 MiB of absorbed query + 96 MiB of masks."""
    model = load_model("deepseek-ai/DeepSeek-V3")
    old = dict(n_ctx=32768, n_parallel=1, n_outputs_max=2048, fa_mask_f32=True)
    m = llamacpp_memory(model, **old)  # type: ignore[arg-type]
    assert m.compute_bytes / MIB == pytest.approx(430.01, rel=0.05)
    logits_step = model.hidden_size * 512 * 4 + model.vocab_size * 512 * 4  # 266.5 MiB: not the peak
    assert m.compute_bytes > logits_step + 32768 * 512 * 6
    no_f32 = llamacpp_memory(model, **{**old, "fa_mask_f32": False})  # type: ignore[arg-type]
    assert m.compute_bytes - no_f32.compute_bytes == 32768 * 512 * 4

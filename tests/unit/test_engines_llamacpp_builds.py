"""llama.cpp's build number and the rules that depend on it (servelab/engines/llamacpp/builds.py; PR #23861,
b9460: the compute buffer's graph reserved with min(n_tokens, n_outputs_max) outputs; PR #23764, b9410: the
flash-attention mask reserved in f16 only; PR #18148, b7470: -ngl counts the output layer, offloaded first)."""

from __future__ import annotations

import pytest

from servelab.engines.llamacpp.builds import (
    F16_MASK_BUILD,
    OUTPUT_FIRST_BUILD,
    OUTPUTS_MAX_BUILD,
    fa_mask_keeps_f32,
    output_layer_first,
    parse_build,
    reserved_outputs,
)
from servelab.engines.llamacpp.memory import gpu_layers, llamacpp_memory
from servelab.engines.llamacpp.settings import LlamaCppSettings
from servelab.errors import ConfigError
from servelab.hardware.gpus import find_gpu
from servelab.model.load import load_model
from servelab.plan.make import make_plan
from servelab.sizing.fit import PlanSettings


def test_build_numbers_as_logs_and_tags_print_them() -> None:
    assert parse_build("b8354") == 8354
    assert parse_build("5466 (9ecf3e66), llama-b5466-bin-win-cuda-12.4-x64") == 5466
    assert parse_build("b2554 (commit 25f4a613)") == 2554
    assert parse_build("b9460-de6f727") == 9460
    assert parse_build(None) is None
    with pytest.raises(ConfigError, match="not a build number"):
        parse_build("0.3.36")
    with pytest.raises(ConfigError, match="shallow clone"):
        parse_build("b1-0c1e570")  # llama-cpp-python's vendored copy prints `build: 1 (0c1e570)`


def test_builds_before_b9460_reserve_every_token_as_an_output() -> None:
    assert OUTPUTS_MAX_BUILD == 9460
    assert reserved_outputs(9459, 2048) == 2048  # graph_reserve(n_tokens, n_seqs, n_tokens)
    assert reserved_outputs(9460, 2048) is None  # min(n_tokens, n_outputs_max): the server's n_parallel
    assert reserved_outputs(None, 2048) is None


def test_the_plan_of_an_older_build_holds_the_logits_of_the_ubatch() -> None:
    """Qwen3.5-35B-A3B at -ub 512, -fa on, 4 slots (issue 20587's b8354 log: CUDA0 compute buffer 553.01 MiB)."""
    from servelab.engines.llamacpp.planner import plan
    from servelab.hardware.gpus import find_gpu

    model = load_model("Qwen/Qwen3.5-35B-A3B")
    gpu = find_gpu("h100-sxm")
    unified = LlamaCppSettings(kv_unified=True)
    old = plan(model, gpu, PlanSettings(context=1024, engine=unified, parallel=4, engine_version="b8354"))
    now = plan(model, gpu, PlanSettings(context=1024, engine=unified, parallel=4))
    logits = model.vocab_size * 512 * 4
    same = llamacpp_memory(
        model, n_ctx=1024, n_parallel=4, kv_unified=True, n_outputs_max=2048, fa_mask_f32=True
    )
    assert old.figures.compute_buffer_bytes == same.compute_bytes > logits
    assert now.figures.compute_buffer_bytes < logits
    assert (
        plan(
            model, gpu, PlanSettings(context=1024, engine=unified, parallel=4, engine_version="b9460")
        ).figures
        == now.figures
    )


def test_builds_before_b9410_keep_the_f32_mask_beside_its_f16_cast() -> None:
    assert F16_MASK_BUILD == 9410 < OUTPUTS_MAX_BUILD
    assert fa_mask_keeps_f32(9409) and not fa_mask_keeps_f32(9410) and not fa_mask_keeps_f32(None)


def test_the_f32_mask_of_an_older_flash_attention_graph_is_in_its_buffer() -> None:
    """-fa on before b9410: the f32 [n_kv, n_tokens] mask (4 B a cell) sits beside the f16 cast in the layers'
    step; -fa off has one f32 mask either way. Neither mask outlives the last layer's attention without a
    pipeline (ggml-alloc frees an input after its last consumer), so a logits-bound graph (Qwen3.5's 248K vocab x
    the 512 outputs these builds reserve) is the same in b9409 and b9410."""
    from servelab.engines.llamacpp.planner import plan
    from servelab.hardware.gpus import find_gpu

    model = load_model("Qwen/Qwen3.5-35B-A3B")
    layers_bound = dict(n_ctx=8192, n_parallel=1)  # the current server's one output: the layers are the peak
    with_f32 = llamacpp_memory(model, fa_mask_f32=True, **layers_bound)  # type: ignore[arg-type]
    assert with_f32.compute_bytes - llamacpp_memory(model, **layers_bound).compute_bytes == 8192 * 512 * 4  # type: ignore[arg-type]
    gpu = find_gpu("h100-sxm")
    for flash in ("on", "off"):
        settings = LlamaCppSettings(flash_attn=flash)
        assert (
            plan(model, gpu, PlanSettings(context=8192, engine=settings, engine_version="b9409")).figures
            == plan(model, gpu, PlanSettings(context=8192, engine=settings, engine_version="b9410")).figures
        )


def test_ngl_counts_the_output_layer_and_offloads_it_first_from_b7470() -> None:
    """llama-model.cpp from PR #18148: i_gpu_start = max(n_layer + 1 - ngl, 0) over the repeating layers and the
    output layer at index n_layer; before it, -ngl N was the last N repeating layers, the output layer only past
    n_layer."""
    assert gpu_layers(0, 40) == (0, False)
    assert gpu_layers(1, 40) == (0, True)
    assert gpu_layers(20, 40) == (19, True)
    assert gpu_layers(41, 40) == (40, True)
    assert gpu_layers(20, 40, output_first=False) == (20, False)
    assert gpu_layers(40, 40, output_first=False) == (40, False)
    assert gpu_layers(41, 40, output_first=False) == (40, True)
    assert OUTPUT_FIRST_BUILD == 7470
    assert output_layer_first(None) and output_layer_first(7470) and not output_layer_first(7469)
    model = load_model("Qwen/Qwen3-8B")
    new = llamacpp_memory(model, n_ctx=8192, n_parallel=1, n_gpu_layers=20)
    old = llamacpp_memory(model, n_ctx=8192, n_parallel=1, n_gpu_layers=20, output_first=False)
    assert (new.n_gpu_layers, new.output_on_gpu, old.n_gpu_layers, old.output_on_gpu) == (19, True, 20, False)
    assert new.model_bytes == old.model_bytes and new.model_gpu_bytes != old.model_gpu_bytes
    assert new.kv_gpu_bytes < old.kv_gpu_bytes  # one attention layer fewer on the GPU
    settings = dict(context=8192, n_gpu_layers=20)
    current = make_plan(model, find_gpu("rtx4090"), engine="llamacpp", quant="Q4_K_M", **settings)
    early = make_plan(
        model, find_gpu("rtx4090"), engine="llamacpp", quant="Q4_K_M", engine_version="b7000", **settings
    )
    assert (current.details["n_gpu_layers"], early.details["n_gpu_layers"]) == (19, 20)
    assert any("-ngl 20 keeps 17 of 36 layers" in w for w in current.warnings)
    assert any("-ngl 20 keeps 16 of 36 layers" in w for w in early.warnings)

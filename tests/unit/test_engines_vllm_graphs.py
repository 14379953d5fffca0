"""vLLM's CUDA graphs (servelab/engines/vllm/graphs.py): the graphs a launch captures, read against the
"Profiling CUDA graph memory" lines of real logs, and the estimate's sum as profile_cudagraph_memory makes it."""

from __future__ import annotations

import importlib.util
import statistics
import sys
from pathlib import Path
from types import ModuleType

import pytest

from servelab.engines.vllm import cmdline, graphs, profile
from servelab.engines.vllm.graphs import Compilation, counts_line, graph_counts
from servelab.engines.vllm.memory import cuda_graph_bytes, vllm_memory
from servelab.engines.vllm.settings import VllmSettings, compilation
from servelab.errors import ConfigError
from servelab.hardware.gpus import find_gpu
from servelab.model.catalog import catalog_model
from servelab.model.load import load_model
from servelab.plan.make import make_plan

GIB = 1024**3


@pytest.mark.parametrize(
    ("seqs", "batched", "spec", "mode", "line"),
    [
        # LMCache issue 3430 (0.21.0, Qwen3-8B, default 256 sequences, 2048 tokens)
        (256, 2048, 0, None, "PIECEWISE=51 (largest=512), FULL=35 (largest=256)"),
        # club-3090 issue 434 (two sequences, MTP 3: sizes rounded to multiples of 4)
        (2, 8192, 3, None, "PIECEWISE=3 (largest=16), FULL=2 (largest=8)"),
        # club-3090 PR 44 and issue 584 (FlashInfer with spec decode falls back to PIECEWISE: no rounding)
        (4, 8192, 3, "PIECEWISE", "PIECEWISE=7 (largest=32)"),
        (2, 8192, 3, "PIECEWISE", "PIECEWISE=5 (largest=16)"),
    ],
)
def test_the_graph_counts_are_those_the_logs_print(
    seqs: int, batched: int, spec: int, mode: str | None, line: str
) -> None:
    assert counts_line(graph_counts(seqs, batched, spec, Compilation(mode))) == line


def test_the_capture_sizes_stop_at_the_batched_tokens_and_follow_an_explicit_list() -> None:
    assert graph_counts(1024, 300) == {
        "PIECEWISE": (37, 288),
        "FULL": (37, 288),
    }  # 3 + 31 below 256, then 256, 272, 288
    explicit = Compilation(cudagraph_capture_sizes=(1, 2, 4, 8, 16, 8192))
    assert graph_counts(256, 2048, compilation=explicit) == {"PIECEWISE": (5, 16), "FULL": (5, 16)}
    assert graph_counts(256, 2048, compilation=Compilation("FULL_DECODE_ONLY")) == {"FULL": (35, 256)}
    assert graph_counts(256, 2048, compilation=Compilation("NONE")) == {}
    assert graph_counts(256, 2048, enforce_eager=True) == {}


def test_the_estimate_is_one_first_capture_plus_the_later_graphs_of_each_mode() -> None:
    model = catalog_model("Qwen/Qwen3-8B")
    per_graph = graphs.bytes_per_graph(model)
    counts = graph_counts(256, 2048)
    assert graphs.graph_equivalents(counts) == 1 + 50 + 34
    assert graphs.largest_capture(counts) == 512
    pool = graphs.first_capture_pool_bytes(model, 512)
    assert pool == int(graphs.POOL_BYTES_PER_TOKEN_LAYER_HIDDEN * 512 * 36 * 4096)
    assert graphs.estimate_bytes(model, counts) == pool + per_graph * (1 + 50 + 34)
    assert graphs.estimate_bytes(model, {}) == 0
    # LMCache issue 3430: 0.52 GiB for Qwen3-8B's 85 graph-equivalents (one of the fit's cases)
    assert graphs.estimate_bytes(model, counts) / GIB == pytest.approx(0.52, abs=0.01)


def _fit_script() -> ModuleType:
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "fit_graph_bytes.py"
    spec = importlib.util.spec_from_file_location("fit_graph_bytes", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


def test_the_graph_figures_are_the_fit_over_every_case_that_prints_the_estimate() -> None:
    fit = _fit_script()
    rows = fit.rows()
    assert len(rows) >= 8  # every plannable case printing "Estimated CUDA graph memory" but the GB10's
    pool, attention, recurrent = fit.fit(rows)
    assert pytest.approx(pool, abs=0.0006) == graphs.POOL_BYTES_PER_TOKEN_LAYER_HIDDEN
    assert pytest.approx(attention / graphs.MIB, abs=0.0006) == graphs.ATTENTION_LAYER_MIB
    assert pytest.approx(recurrent / graphs.MIB, abs=0.0006) == graphs.RECURRENT_LAYER_MIB
    # in sample the median is within the 5 %; held out one case at a time it is about twice that
    # (docs/reference/memory.md §3 lists each case)
    in_sample = [abs(fit.predict(r, (pool, attention, recurrent)) / r.printed - 1) for r in rows]
    assert statistics.median(in_sample) <= 0.05
    assert statistics.median(abs(e) for e in fit.held_out(rows)) < 0.10


def test_a_hybrid_graph_costs_more_per_recurrent_layer() -> None:
    dense = catalog_model("Qwen/Qwen3-8B")  # 36 attention layers
    hybrid = catalog_model("Qwen/Qwen3.5-27B")  # 16 attention + 48 Gated DeltaNet layers
    assert graphs.bytes_per_graph(hybrid) > 2 * graphs.bytes_per_graph(dense)


def test_eager_and_the_mode_change_what_the_budget_loses_from_v0_20() -> None:
    model = catalog_model("Qwen/Qwen3-8B")
    kw = {"gpu_memory_bytes": 24 * GIB, "weights_bytes": 16 * GIB, "max_model_len": 16384}
    default = vllm_memory(model, version="0.21.0", **kw)  # type: ignore[arg-type]
    eager = vllm_memory(model, version="0.21.0", enforce_eager=True, **kw)  # type: ignore[arg-type]
    piecewise = vllm_memory(model, version="0.21.0", compilation=Compilation("PIECEWISE"), **kw)  # type: ignore[arg-type]
    v020 = vllm_memory(model, version="0.20.0", **kw)  # type: ignore[arg-type]
    before = vllm_memory(model, version="0.19.1", **kw)  # type: ignore[arg-type]
    assert eager.cuda_graph_bytes == 0 < piecewise.cuda_graph_bytes < default.cuda_graph_bytes
    assert eager.kv_budget_bytes - default.kv_budget_bytes == default.cuda_graph_bytes
    # the v0.20.0 wheel's envs.py already defaults VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS to 1
    assert v020.kv_budget_bytes == default.kv_budget_bytes
    assert before.kv_budget_bytes == eager.kv_budget_bytes  # before v0.20 graphs are captured after sizing


def test_model_runner_v2_subtracts_no_graph_estimate() -> None:
    """V2's profile_cudagraph_memory returns 0 (v0.22.0-v0.27.1): the releases and models that run it by default
    keep the whole budget, and the plan warns that the graphs come after the pool."""
    dense, hybrid = catalog_model("Qwen/Qwen3-8B"), catalog_model("Qwen/Qwen3.5-27B")
    llama, moe = catalog_model("meta-llama/Llama-3.1-8B-Instruct"), catalog_model("Qwen/Qwen3-30B-A3B")
    assert not profile.model_runner_v2(dense, (0, 21, 0))
    assert profile.model_runner_v2(dense, (0, 22, 0))  # Qwen3ForCausalLM is the one default of v0.22
    assert not profile.model_runner_v2(llama, (0, 22, 0))
    assert profile.model_runner_v2(llama, (0, 24, 0))  # LlamaForCausalLM joins the list in v0.24
    assert profile.model_runner_v2(catalog_model("google/gemma-3-27b-it"), (0, 25, 0))  # any dense model
    assert not profile.model_runner_v2(moe, (0, 26, 0))  # Qwen3MoeForCausalLM is not listed
    assert not profile.model_runner_v2(hybrid, (0, 26, 0))
    assert not profile.model_runner_v2(dense, (0, 26, 0), "ngram")  # V2 lacks ngram: the V1 runner
    assert profile.model_runner_v2(dense, (0, 26, 0), "eagle")
    kw = {"gpu_memory_bytes": 24 * GIB, "weights_bytes": 16 * GIB, "max_model_len": 16384}
    v1 = vllm_memory(dense, version="0.21.0", **kw)  # type: ignore[arg-type]
    v2 = vllm_memory(dense, version="0.22.0", **kw)  # type: ignore[arg-type]
    assert v2.cuda_graph_bytes == v1.cuda_graph_bytes > 0
    assert v2.kv_budget_bytes - v1.kv_budget_bytes == v1.cuda_graph_bytes
    assert any("Model Runner V2" in w for w in v2.warnings) and not v1.warnings


def test_the_compilation_config_flag_is_read_and_checked() -> None:
    settings = VllmSettings(
        compilation_config='{"cudagraph_mode": "PIECEWISE", "cudagraph_capture_sizes": [1, 8]}'
    )
    assert compilation(settings) == Compilation("PIECEWISE", (1, 8), None)
    assert compilation(VllmSettings()) == Compilation()
    for bad, words in (
        ('{"cudagraph_mode": "SOMETIMES"}', "cudagraph_mode 'SOMETIMES'"),
        ('{"cudagraph_capture_sizes": [1, "8"]}', "cudagraph_capture_sizes"),
        ("[1]", "--compilation-config must be a JSON object"),
        ("{mode", "--compilation-config is not JSON"),
    ):
        with pytest.raises(ConfigError, match=words):
            VllmSettings(compilation_config=bad)


@pytest.mark.parametrize(
    ("capability", "kv_dtype", "backend"),
    [
        ("8.6", "auto", "FLASH_ATTN"),  # RTX 3090 / A5000, bf16 cache: FlashAttention first
        ("8.6", "fp8_e5m2", "FLASHINFER"),  # FlashAttention holds no fp8 cache outside Hopper's FA3
        ("12.0", "fp8", "FLASHINFER"),  # RTX 5090 with an fp8 cache (club-3090's FlashInferBackend lines)
        ("9.0", "fp8_e4m3", "FLASH_ATTN"),  # H100: FA3 holds e4m3
        ("9.0", "fp8_e5m2", "FLASHINFER"),
        ("10.0", "auto", "FLASHINFER"),  # B200: FlashInfer first whatever the cache
        (None, "auto", ""),  # no CUDA capability (ROCm, CPU): not modelled
    ],
)
def test_the_attention_backend_follows_the_card_and_the_kv_dtype(
    capability: str | None, kv_dtype: str, backend: str
) -> None:
    assert graphs.attention_backend(capability, kv_dtype) == backend


def test_flashinfers_workspace_grows_with_the_batched_tokens_from_v0_26() -> None:
    """flashinfer.py _get_workspace_buffer: 394 MiB up to v0.25; from v0.26.0 (PR 48428) at least
    max_num_batched_tokens x query heads per GPU x head dim x 16 B."""
    mib = 1024**2
    assert graphs.flashinfer_workspace_bytes((0, 25, 0), 32768, 24, 256) == 394 * mib
    assert graphs.flashinfer_workspace_bytes((0, 26, 0), 4096, 24, 256) == 394 * mib  # 384 MiB < the floor
    assert graphs.flashinfer_workspace_bytes((0, 26, 0), 8192, 24, 256) == 768 * mib
    assert graphs.flashinfer_workspace_bytes((0, 26, 0), 32768, 24, 256) == 3 * GIB
    # its own decode wrapper only where neither trtllm-gen (SM10x) nor XQA (SM90 from v0.25.0) decodes
    assert graphs.flashinfer_native_decode("12.0", (0, 26, 0))
    assert graphs.flashinfer_native_decode("9.0", (0, 24, 0))
    assert not graphs.flashinfer_native_decode("9.0", (0, 25, 0))
    assert not graphs.flashinfer_native_decode("10.0", (0, 21, 0))


def test_the_first_full_capture_charges_the_workspace_as_vllm_50780_and_52872_measure() -> None:
    """vllm#52872's RTX 5090 sweep of a 64-layer hybrid (16 attention + 48 Gated DeltaNet: Qwen3.6-27B's stack,
    24 query heads of 256): the graph pool 0.52 GiB at 2048, 3072 and 4096 batched tokens, 0.89 at 8192. Only the
    workspace changes with the batched tokens once they pass the largest capture (512): flat below 4096 x 24 x
    256 x 16 B = 384 MiB (the 394 MiB floor), then 768 MiB at 8192, 0.365 GiB more (0.37 printed)."""
    model = catalog_model("Qwen/Qwen3.5-27B")

    def estimate(batched: int, version: str = "0.26.0", kv: str = "fp8") -> int:
        return cuda_graph_bytes(
            model, 4, batched, compute_capability="12.0", kv_cache_dtype=kv, version=version
        )

    assert estimate(2048) == estimate(3072) == estimate(4096)
    assert (estimate(8192) - estimate(4096)) / GIB == pytest.approx(0.37, abs=0.006)
    assert estimate(8192, version="0.25.0") == estimate(4096)  # the floor alone before v0.26
    # a bf16 cache runs FlashAttention there: no workspace, and nothing grows
    assert estimate(8192, kv="auto") == estimate(2048, kv="auto") < estimate(2048) - 380 * 1024**2
    # speculative decoding on FlashInfer's own decode: PIECEWISE only (club-3090 issue 104), no FULL capture
    spec = cuda_graph_bytes(
        model, 2, 8192, 3, compute_capability="8.6", kv_cache_dtype="fp8_e5m2", version="0.26.0"
    )
    assert spec == graphs.estimate_bytes(model, graph_counts(2, 8192, 3, Compilation("PIECEWISE")))


def test_an_asked_attention_backend_decides_the_workspace() -> None:
    """--attention-backend, read from the words after `plan --engine vllm --` and passed to the launch: FLASHINFER
    on a 3090 with a bf16 cache charges the workspace FlashAttention would not; FLASH_ATTN with an fp8 cache drops
    it (vLLM would refuse that pair outside Hopper; the plan takes the launch as asked)."""
    asked = cmdline.settings(["--attention-backend", "FLASHINFER"])
    assert asked.attention_backend == "FLASHINFER"
    with pytest.raises(ConfigError, match="--attention-backend"):
        VllmSettings(attention_backend="flash attn")
    assert graphs.attention_backend("8.6", "auto", "flashinfer") == "FLASHINFER"
    model = load_model("Qwen/Qwen3-8B")
    gpu = find_gpu("rtx3090")
    # v0.21.0: the V1 runner takes the estimate out of the budget (a dense Qwen3 runs Model Runner V2 from v0.22)
    default = make_plan(model, gpu, engine="vllm", context=16384, engine_version="0.21.0")
    flashinfer = make_plan(
        model, gpu, engine="vllm", context=16384, engine_version="0.21.0", attention_backend="FLASHINFER"
    )
    extra = int(str(flashinfer.details["cuda_graph_bytes"])) - int(str(default.details["cuda_graph_bytes"]))
    # the FULL first capture (the 394 MiB; its activations at 256 reuse the PIECEWISE capture's at 512) now
    # outweighs the PIECEWISE one (512)
    assert extra == graphs.FLASHINFER_WORKSPACE_BYTES - graphs.first_capture_pool_bytes(model, 512)
    assert flashinfer.command[-2:] == ("--attention-backend", "FLASHINFER")
    assert default.details["kv_budget_bytes"] - flashinfer.details["kv_budget_bytes"] == extra


def test_trtllm_and_xqa_decode_charge_the_global_buffer_once() -> None:
    """SM10x (trtllm-gen) and SM90 from v0.25.0 (XQA) decode on flashinfer.py's module-global 394 MiB buffer, not
    the builder's workspace: one buffer, whatever the batched tokens or the attention groups."""
    model = catalog_model("Qwen/Qwen3.5-27B")
    kw = {"kv_cache_dtype": "fp8_e5m2", "version": "0.26.0", "attention_groups": 2}
    bf16 = cuda_graph_bytes(model, 4, 32768, compute_capability="9.0", version="0.26.0")  # FlashAttention
    xqa = cuda_graph_bytes(model, 4, 32768, compute_capability="9.0", **kw)  # type: ignore[arg-type]
    native = cuda_graph_bytes(model, 4, 32768, compute_capability="9.0", **{**kw, "version": "0.24.0"})  # type: ignore[arg-type]
    # the FULL first capture (the buffer; its activations at 4 reuse the PIECEWISE capture's at 8) outweighs the
    # PIECEWISE one (8)
    step = -graphs.first_capture_pool_bytes(model, 8)
    assert xqa - bf16 == graphs.FLASHINFER_WORKSPACE_BYTES + step
    assert native - bf16 == 2 * graphs.FLASHINFER_WORKSPACE_BYTES + step  # v0.24: its own decode, per group


def test_the_full_first_capture_reuses_the_piecewise_activations() -> None:
    """gpu_model_runner.py `profile_cudagraph_memory` (v0.19.1 5896-5926): one `empty_cache`, then the PIECEWISE
    captures before the FULL ones (cudagraph_dispatcher.py `get_capture_descs`) in one profiling pool, each
    capture's free-memory drop measured. The FULL first capture's warm-up and graph reuse what the PIECEWISE first
    capture left cached and released (CUDAGraphWrapper's `weak_ref_tensors`), so it adds only the activations
    beyond those and what is new to it (FlashInfer's workspace); FULL alone pays its activations."""
    model = catalog_model("Qwen/Qwen3.5-27B")
    pool = graphs.first_capture_pool_bytes
    workspace = graphs.FLASHINFER_WORKSPACE_BYTES
    both = {"PIECEWISE": (51, 512), "FULL": (35, 256)}
    assert graphs.first_captures(model, both) == [pool(model, 512), 0]
    assert graphs.first_captures(model, both, workspace) == [pool(model, 512), workspace]
    wider_full = {
        "PIECEWISE": (3, 16),
        "FULL": (4, 32),
    }  # not a count vLLM makes (FULL sizes are PIECEWISE ones)
    assert graphs.first_captures(model, wider_full)[1] == pool(model, 32) - pool(model, 16)
    assert graphs.first_captures(model, {"FULL": (35, 256)}, workspace) == [pool(model, 256) + workspace]
    per_graph = graphs.bytes_per_graph(model)
    assert graphs.estimate_bytes(model, both, workspace) == max(pool(model, 512), workspace) + 85 * per_graph

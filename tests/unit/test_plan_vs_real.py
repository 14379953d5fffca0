"""The planner on every plannable real-log case (tests/fixtures/real-logs/, read by tests/real_logs.py).

Two checks, both against what real engines printed. The fit verdict: where the engine refused to start the
plan must not say it fits, and where it started the plan must not say it does not; the refused cases the plan
is optimistic about today are named in OPTIMISTIC_TODAY, exactly (one fixed must leave the list). The figures:
each figure the planner gets within the case's tolerance today is pinned in WITHIN_TODAY and must stay
within; the others are listed, with their errors, by benchmarks/plan_vs_real.py (issue 16's baseline).
"""

from __future__ import annotations

import pytest

from servelab.hardware.gpus import find_gpu
from servelab.plan.make import make_plan
from tests.real_logs import (
    Case,
    Outcome,
    case_gpu,
    case_model,
    compare,
    fit_signal,
    load_cases,
    outcome,
    plan_inputs,
    plannable_cases,
    run_plan,
)

CASES = plannable_cases()
BY_NAME = {case.name: case for case in load_cases()}

# Refused cases where the plan says `fits` today (issue 16 item 3 will empty this).
OPTIMISTIC_TODAY: set[str] = set()  # none today; a case the plan is optimistic about goes here

# (case, figure) within the case's tolerance today; they must stay there.
WITHIN_TODAY = (
    ("vllm/gpt-oss-120b-h100-marlin-refused", "weights_gib"),
    ("vllm/gpt-oss-120b-h100-util095-mbt1024-refused", "kv_budget_gib"),
    ("vllm/gpt-oss-20b-a100-v0190", "weights_gib"),
    ("vllm/gpt-oss-20b-a100-v0190", "kv_budget_gib"),
    ("vllm/qwen3-14b-v1-32k-lmcache", "kv_tokens@engine_budget"),
    ("vllm/qwen3-235b-a22b-fp8-4xh100", "kv_tokens@engine_budget"),
    ("vllm/qwen3.5-35b-a3b-tp4-h100-dflash", "weights_gib"),
    ("vllm/qwen3.6-27b-fp8-h100-mamba-blocks-refused", "mamba_cache_blocks"),
    ("vllm/qwen3.6-35b-a3b-nvfp4-rtx5090-fp8kv", "kv_tokens@engine_budget"),
    ("vllm/v0-llama31-8b-rtx3090-20k", "weights_gib"),
    ("vllm/v0-llama31-8b-rtx3090-20k", "kv_budget_gib"),
    ("vllm/v0-llama31-8b-rtx3090-20k", "gpu_blocks"),
    ("vllm/v0-llama31-8b-rtx3090-20k", "max_concurrency"),
    ("vllm/v0-llama31-8b-rtx3090-29k-refused", "kv_budget_gib"),
    ("vllm/v0-llama31-8b-rtx3090-29k-refused", "gpu_blocks"),
    ("vllm/v0-llama31-8b-rtx3090-29k-refused", "kv_tokens"),
    ("vllm/v0-llama31-8b-rtx3090-29k-refused", "max_concurrency"),
    ("vllm/v0-llama31-8b-rtx3090-29k-refused", "weights_gib"),
    ("vllm/v0-llama31-8b-rtx3090-29k-refused", "kv_tokens@engine_budget"),
    ("vllm/v1-0.7-llama31-70b-w8a8-gpu-blocks", "weights_gib"),
    ("sglang/gpt-oss-20b-kvcached-weights", "weights_gib"),
    ("sglang/kimi-k2.5-tp8-mi355x-mla", "kv_tokens@engine_budget"),
    ("sglang/qwen3-next-80b-tp4-mi300x-aiter", "weights_gib"),
    ("sglang/qwen3-next-80b-tp4-mi300x-aiter", "kv_budget_gib"),  # with 0.5.4.post1's aiter x 0.90
    ("sglang/qwen3-next-80b-tp4-mi300x-aiter", "kv_tokens"),
    ("sglang/qwen3-next-80b-tp4-mi300x-aiter", "mamba_cache_slots"),
    ("llamacpp/qwen2.5-coder-32b-q4ks-7900xtx-32k-q8kv", "kv_mib_total"),
    (
        "llamacpp/qwen2.5-coder-32b-q4ks-7900xtx-32k-q8kv",
        "compute_mib[ROCm0]",
    ),  # the mask freed before the logits
    ("sglang/llama-3.1-8b-fa3-h100", "weights_gib"),
    ("sglang/llama-3.1-8b-fa3-h100", "kv_budget_gib"),  # with 0.4.4's mem_fraction_static by TP size
    ("sglang/llama-3.1-8b-fa3-h100", "kv_tokens"),
    ("sglang/llama-3.1-8b-fa3-h100", "kv_tokens@engine_budget"),
    ("sglang/qwen3-235b-a22b-fp8-tp4-h100", "kv_tokens@engine_budget"),
    ("sglang/qwen3-30b-a3b-fp8-tp2-piecewise", "weights_gib"),
    ("sglang/qwen3-30b-a3b-fp8-tp2-piecewise", "kv_tokens@engine_budget"),
    ("llamacpp/deepseek-r1-distill-qwen-7b-f16-kv", "kv_mib[GPUs]"),
    ("llamacpp/deepseek-r1-distill-qwen-7b-f16-kv", "kv_mib_total"),
    ("llamacpp/deepseek-r1-distill-qwen-7b-f16-kv", "output_mib"),
    ("llamacpp/deepseek-v3-8gpu-q4_0k-np8", "kv_tokens"),
    ("llamacpp/deepseek-v3-8gpu-q4_0k-np8", "n_ctx_per_seq"),
    ("llamacpp/deepseek-v3-cpu-mla-fa-32k", "kv_mib_total"),
    ("llamacpp/deepseek-v3-cpu-mla-fa-32k", "kv_tokens"),
    ("llamacpp/deepseek-v3-cpu-mla-fa-32k", "n_ctx_per_seq"),
    ("llamacpp/deepseek-v3-cpu-mla-fa-32k", "output_mib"),
    ("llamacpp/llama-3-70b-2gpu-4060ti-3060-split", "kv_mib[GPUs]"),
    ("llamacpp/llama-3-70b-2gpu-4060ti-3060-split", "kv_mib_total"),
    ("llamacpp/llama-3-70b-2gpu-4060ti-3060-split", "kv_tokens"),
    ("llamacpp/llama-3-70b-2gpu-4060ti-3060-split", "compute_mib[CUDA0]"),
    ("llamacpp/llama-3.1-70b-q4kl-rocm-ngl0-compute-oom", "compute_bytes"),
    ("llamacpp/qwen3-30b-a3b-q4km-4080s-ngl30-b5466", "weights_mib[GPUs]"),
    ("llamacpp/qwen3-30b-a3b-q4km-4080s-ngl30-b5466", "weights_mib_total"),
    ("llamacpp/qwen3-30b-a3b-q4km-4080s-ngl30-b5466", "kv_tokens"),
    ("llamacpp/qwen3-30b-a3b-q4km-4080s-ngl30-b5466", "n_ctx_per_seq"),
    ("llamacpp/qwen3-next-80b-q4km-gfx1151-kv", "kv_mib"),
    ("llamacpp/qwen3-next-80b-q4km-gfx1151-kv", "kv_tokens"),
    ("llamacpp/qwen3.5-35b-a3b-q4km-cuda-ngl19-rs-split", "kv_mib_total"),
    ("llamacpp/qwen3.5-35b-a3b-q4km-cuda-ngl19-rs-split", "kv_tokens"),
    ("llamacpp/qwen3.5-35b-a3b-q4km-cuda-ngl19-rs-split", "recurrent_mib[GPUs]"),
    ("llamacpp/qwen3.5-35b-a3b-q4km-cuda-ngl19-rs-split", "recurrent_mib_total"),
)


def _outcome(name: str) -> Outcome:
    return outcome(BY_NAME[name])


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_the_planner_plans_every_plannable_case(case: Case) -> None:
    result = outcome(case)
    assert result.plan is not None, f"the planner refused the case's inputs: {result.error}"
    assert result.comparisons, "a plannable case has figures to compare"


@pytest.mark.parametrize("case", [c for c in CASES if fit_signal(c)], ids=lambda c: c.name)
def test_the_fit_verdict_agrees_with_the_engine(case: Case) -> None:
    result = outcome(case)
    assert result.plan is not None
    if case.data["started"]:
        assert result.plan.fits, f"the engine started; the plan says it does not fit: {result.plan.warnings}"
    elif case.name in OPTIMISTIC_TODAY:
        assert result.plan.fits, f"{case.name} is no longer optimistic: take it out of OPTIMISTIC_TODAY"
    else:
        assert not result.plan.fits, f"the engine refused ({case.data['refusal'].strip()}); the plan fits"


def test_the_optimistic_list_names_refused_cases_with_a_fit_signal() -> None:
    for name in OPTIMISTIC_TODAY:
        assert BY_NAME[name].data["started"] is False and fit_signal(BY_NAME[name])


@pytest.mark.parametrize("name,figure", WITHIN_TODAY, ids=[f"{n}:{f}" for n, f in WITHIN_TODAY])
def test_the_figures_the_planner_gets_right_stay_right(name: str, figure: str) -> None:
    rows = [c for c in _outcome(name).comparisons if c.figure == figure]
    assert len(rows) == 1, f"{name} has no compared figure {figure}"
    row = rows[0]
    assert row.error is not None, f"{figure} is no longer compared: {row.why}"
    assert row.within, (
        f"{figure}: engine {row.engine_value}, plan {row.plan_value} ({row.error:+.1%}),"
        f" tolerance {row.tolerance:.0%}"
    )


def test_a_case_becomes_the_planners_inputs() -> None:
    """The reader's translation, on one case per engine (exact values from the case files)."""
    vllm = BY_NAME["vllm/qwen3.6-27b-fp8-h100-mamba-blocks-refused"]
    assert plan_inputs(vllm) == {
        "engine": "vllm",
        "quant": "fp8",
        "context": 262144,
        "gpus": 1,
        "gpu_memory_utilization": 0.95,
        "max_num_seqs": 1024,
    }
    sglang = BY_NAME["sglang/qwen3-235b-a22b-fp8-tp4-h100"]
    assert plan_inputs(sglang) == {
        "engine": "sglang",
        "quant": "fp8",
        "parallel": 1,
        "gpus": 4,
        "mem_fraction_static": 0.93,
        "engine_version": "0.4.9.post2",  # July 2025, from the notes (tests/real_logs.py VERSION_FROM_NOTES)
    }
    llama = BY_NAME["llamacpp/deepseek-v3-8gpu-q4_0k-np8"]
    assert plan_inputs(llama) == {
        "engine": "llamacpp",
        "quant": "Q8_0",  # the stand-in mix: the excerpt does not name the GGUF's
        "context": 2048,
        "kv_dtype": "q4_0",
        "kv_dtype_v": "f16",
        "flash_attn": "off",
        "parallel": 8,
        "gpus": 8,
        "n_batch": 256,
        "n_ubatch": 256,
        "engine_version": "b7440",  # an early-2025 build: before b7470, the earliest boundary the rules have
    }


def test_the_cases_own_memory_wins_over_the_catalog() -> None:
    case = BY_NAME["vllm/qwen3.5-35b-a3b-tp4-h100-dflash"]
    assert case_gpu(case).memory_mib == round(79.33 * 1024) != find_gpu("h100-sxm").memory_mib
    assert case_gpu(BY_NAME["vllm/gpt-oss-20b-a100-v0190"]) == find_gpu("a100-80g")


def _error(name: str, figure: str, version: str | None) -> float:
    """The figure's error when the case is planned with `version` (None: the current rules)."""
    case = BY_NAME[name]
    plan = make_plan(case_model(case), case_gpu(case), **{**plan_inputs(case), "engine_version": version})
    row = next(c for c in compare(case, plan) if c.figure == figure)
    assert row.error is not None
    return row.error


def test_the_release_a_case_ran_picks_its_rules() -> None:
    """sglang PR #4760 ran main of 2025-03-25 (0.4.4.x: mem_fraction_static 0.88 at tp 1); llama.cpp issue 20587
    ran b8354 (before b9460 the compute buffer holds the logits of every ubatch token)."""
    fa3 = "sglang/llama-3.1-8b-fa3-h100"
    assert (
        abs(_error(fa3, "kv_budget_gib", "0.4.4.post1"))
        < 0.02
        < 0.05
        < abs(_error(fa3, "kv_budget_gib", None))
    )
    split = BY_NAME["llamacpp/qwen3.5-35b-a3b-q4km-cuda-ngl19-rs-split"]  # its compute_mib is `left_out`
    old, now = (
        int(
            make_plan(
                case_model(split), case_gpu(split), **{**plan_inputs(split), "engine_version": v}
            ).details["compute_buffer_bytes"]  # type: ignore[call-overload]
        )
        / 2**20
        for v in ("b8354", None)
    )
    assert 480 < old < 553.01 and now < 60  # 490 and 53 MiB against the 553.01 printed
    assert any(c.why.startswith("left out: ") for c in compare(split, run_plan(split)))

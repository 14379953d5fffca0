"""The corpus rows' launch flags reach the plan the harness makes (predict/corpus/harness.py `setup`): the batch
limit (vLLM --max-num-seqs, sglang --max-running-requests), the served context and the engines' switches; and the
rows that stalled or were refused for want of them replay."""

from __future__ import annotations

import re
from functools import cache

from servelab.engines.sglang.settings import SglangSettings
from servelab.hardware.gpus import find_gpu
from servelab.model.load import load_model
from servelab.plan.make import make_plan
from servelab.predict.corpus import load_corpus
from servelab.predict.corpus.harness import setup
from servelab.predict.corpus.schema import Measurement

# a row flag in the engine's own name -> its launch flag
LAUNCH_WORDS = {
    "max_num_seqs": "--max-num-seqs",
    "max_running_requests": "--max-running-requests",
    "mem_fraction_static": "--mem-fraction-static",
    "max_model_len": "--max-model-len",
}
CODER_NEXT = "Qwen/Qwen3-Coder-Next-FP8"


@cache
def corpus() -> tuple[Measurement, ...]:
    return load_corpus()


def rows(model: str, engine: str) -> list[Measurement]:
    return [r for r in corpus() if r.model == model and r.engine == engine]


def test_a_rows_engine_flags_are_the_values_its_launch_line_gives() -> None:
    """Where a serving row's launch line carries one of these flags, the row's flag says the same."""
    wrong = []
    for row in corpus():
        for name, word in LAUNCH_WORDS.items():
            found = re.findall(re.escape(word) + r"[ =]([0-9.]+)", row.launch)
            if name in row.flags and len(found) == 1 and float(found[0]) != float(row.flags[name]):  # type: ignore[arg-type]
                wrong.append(f"{row.label} {name}={row.flags[name]} launch {word} {found[0]}")
    assert not wrong, wrong[:10]


def test_coder_next_vllm_rows_plan_their_max_num_seqs_and_fit() -> None:
    """The 35 vLLM rows launched with --max-num-seqs 8..64: planned with it, not with vLLM's default of 1024
    sequences that the hybrid's Mamba blocks refuse."""
    vllm = rows(CODER_NEXT, "vllm")
    assert len(vllm) == 35
    for row in vllm:
        s = setup(row)
        assert not isinstance(s, str), f"{row.label}: {s}"
        assert s.plan.details["max_num_seqs"] == row.flags["max_num_seqs"] == row.workload.concurrency
        assert s.plan.context == row.flags["max_model_len"]


def test_coder_next_sglang_rows_plan_their_running_cap_and_state_slots() -> None:
    """--max-running-requests N --disable-radix-cache: N running requests and N state slots (sglang sizes the
    mamba pool to the running cap without the radix cache), not a third of an automatic pool."""
    for row in rows(CODER_NEXT, "sglang")[:12]:
        s = setup(row)
        assert not isinstance(s, str), f"{row.label}: {s}"
        n = row.flags["max_running_requests"]
        assert row.flags["disable_radix_cache"] is True
        assert s.plan.details["max_running_requests"] == s.plan.details["mamba_cache_size"] == n
        assert s.plan.details["mem_fraction_static"] == row.flags["mem_fraction_static"]


def test_sglangs_radix_switch_sizes_a_hybrids_state_pool_to_the_running_cap() -> None:
    """`--parallel 32 -- --disable-radix-cache` on Qwen3-Next: 32 state slots and 32 running requests; with the
    radix cache on, the automatic pool's slots cap the running requests at a third of them."""
    model, gpu = load_model("Qwen/Qwen3-Next-80B-A3B-Instruct"), find_gpu("h200")
    plans = {
        off: make_plan(
            model,
            gpu,
            engine="sglang",
            quant="fp8",
            context=16384,
            parallel=32,
            settings=SglangSettings(disable_radix_cache=off),
        )
        for off in (True, False)
    }
    assert plans[True].details["mamba_cache_size"] == plans[True].details["max_running_requests"] == 32
    radix = plans[False].details
    assert radix["max_running_requests"] == min(32, radix["mamba_cache_size"] // 3)
    assert radix["mamba_cache_size"] > 32
    assert plans[True].details["max_total_tokens"] > radix["max_total_tokens"]  # fewer states, more KV
    assert "--disable-radix-cache" in plans[True].command

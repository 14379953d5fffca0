"""`calibrate.fit` on records the emulator made itself with known effective figures: it returns them."""

from __future__ import annotations

from dataclasses import replace

import pytest

from servelab.bench.level_counts import prompt_count
from servelab.bench.workloads import build_prompts
from servelab.cli.bench import build_config
from servelab.errors import ConfigError
from servelab.hardware.gpus import card_for
from servelab.model.load import load_model
from servelab.plan.make import search_plan
from servelab.predict.calibrate import fit, nonnegative_lstsq, with_rates
from servelab.predict.roofline import AchievedRates
from servelab.predict.virtual_ladder import predict_ladder
from servelab.predict.words import WordTokenizer

pytestmark = pytest.mark.usefixtures("measured_host")  # the "cpu" machine is this one: its bandwidth

TRUTH = AchievedRates(
    bandwidth_bytes_s=6.0e11, flops_s=9.0e13, step_overhead_s=0.003, token_overhead_s=2e-5, source="known"
)


def synthetic(
    engine_name: str,
    model_id: str = "Qwen/Qwen3-8B",
    gpu: str = "rtx4090",
    truth: AchievedRates = TRUTH,
    **plan_options,
):
    """(the engine at the plan's figures, the records of a 1,2,4 short ladder priced at `truth`)."""
    model, card = load_model(model_id), card_for(gpu)
    context = plan_options.pop("context", 8192)
    plan = search_plan(model, card, engine=engine_name, quant="bf16", context=context, **plan_options)
    from servelab.predict.machine import emulated_engine

    engine = emulated_engine(plan, model, card)
    config = build_config(
        {"targets": ["predict"], "concurrency": "1,2,4", "workload": "short", "requests": 8, "chat": False},
        None,
    )
    tokenizer = WordTokenizer()
    prompts = build_prompts(config.workload, prompt_count(config), tokenizer, engine.context)
    _, levels = predict_ladder(with_rates(engine, truth), config, prompts, tokenizer, label="t", model="m")
    return engine, [r for level in levels for r in level]


@pytest.mark.parametrize(("engine_name", "options"), [("llamacpp", {"parallel": 4}), ("vllm", {})])
def test_fit_recovers_the_figures_the_records_were_made_with(engine_name: str, options: dict) -> None:
    engine, records = synthetic(engine_name, **options)
    assert engine.roofline.rates != TRUTH  # the fit starts from the plan's figures
    result = fit(engine, records)
    e = result.rates
    assert e.bandwidth_bytes_s == pytest.approx(TRUTH.bandwidth_bytes_s, rel=1e-6)
    assert e.flops_s == pytest.approx(TRUTH.flops_s, rel=1e-6)
    assert e.step_overhead_s == pytest.approx(TRUTH.step_overhead_s, rel=1e-6)
    assert e.token_overhead_s == pytest.approx(TRUTH.token_overhead_s, rel=1e-5)
    assert e.source == "calibration"
    assert result.r2 == pytest.approx(1.0, abs=1e-9)
    assert result.median_relative < 1e-6
    assert [lv.level for lv in result.levels] == ["c=1", "c=2", "c=4"]
    for lv in result.levels:
        assert lv.ttft_p50_fit_s == pytest.approx(lv.ttft_p50_s, rel=1e-6)
        assert lv.tpot_p50_fit_s == pytest.approx(lv.tpot_p50_s, rel=1e-6)
    assert result.gaps > 0 and result.prefills > 0


def test_nonnegative_lstsq_keeps_an_untouched_column_and_clips_negative_overheads() -> None:
    import numpy as np

    a = np.array([[1.0, 0.0, 1.0, 1.0], [2.0, 0.0, 1.0, 0.0], [3.0, 0.0, 1.0, 2.0], [4.0, 0.0, 1.0, 1.0]])
    x_true = np.array([2.0, 0.0, 0.5, 0.0])
    held = np.array([1.0, 7.0, 0.0, 0.0])
    x = nonnegative_lstsq(a, a @ x_true, held)
    assert x[1] == 7.0  # no data on the compute side: the figure it had
    assert x[0] == pytest.approx(2.0) and x[2] == pytest.approx(0.5) and x[3] == pytest.approx(0.0, abs=1e-12)
    y = a @ np.array([1.0, 0.0, -0.5, 0.0])  # a negative overhead would fit best: held at zero instead
    assert nonnegative_lstsq(a, y, held)[2] == 0.0


def test_no_successful_requests_is_one_line() -> None:
    engine, records = synthetic("llamacpp", parallel=4)
    with pytest.raises(ConfigError, match="no successful streamed requests"):
        fit(engine, [r for r in records if r.status != "ok"])


def test_on_a_cpu_llamacpp_batched_passes_are_fitted_as_their_own_bandwidth() -> None:
    """llama.cpp on the CPU: one-token passes max(memory, compute), passes of >= 2 tokens memory + compute at
    their own bandwidth (tinyBLAS). Records priced at known figures of both kinds give them back."""
    truth = AchievedRates(
        bandwidth_bytes_s=2.0e10,
        flops_s=7.0e10,
        step_overhead_s=0.0005,
        token_overhead_s=1e-5,
        source="known",
        batched_bandwidth_bytes_s=1.0e10,
    )
    engine, records = synthetic("llamacpp", "meta-llama/Llama-3.2-1B", "cpu", truth, context=2048, parallel=4)
    assert engine.roofline.rates.batched_bandwidth_bytes_s is not None  # from the plan: the same bandwidth
    e = fit(engine, records).rates
    assert e.batched_bandwidth_bytes_s == pytest.approx(truth.batched_bandwidth_bytes_s, rel=1e-6)
    assert e.bandwidth_bytes_s == pytest.approx(truth.bandwidth_bytes_s, rel=1e-6)
    assert e.flops_s == pytest.approx(truth.flops_s, rel=1e-6)
    assert e.step_overhead_s == pytest.approx(truth.step_overhead_s, rel=1e-5)
    on_a_gpu, _ = synthetic("llamacpp", "meta-llama/Llama-3.2-1B", "rtx4090", context=2048, parallel=4)
    assert on_a_gpu.roofline.rates.batched_bandwidth_bytes_s is None


def test_a_prefill_compute_of_its_own_is_fitted_where_prompts_run_faster_than_batched_decodes() -> None:
    """llama.cpp on the CPU with prompt tokens at 1.25x the compute of batched decodes (tinyBLAS on a 128-token
    pass against a few-token one): records priced so give both computes back, and the profile keeps it."""
    truth = AchievedRates(
        bandwidth_bytes_s=2.0e10,
        flops_s=7.0e10,
        step_overhead_s=0.0005,
        token_overhead_s=1e-5,
        source="known",
        batched_bandwidth_bytes_s=1.0e10,
        prefill_flops_s=8.75e10,
    )
    engine, records = synthetic("llamacpp", "meta-llama/Llama-3.2-1B", "cpu", truth, context=2048, parallel=4)
    e = fit(engine, records).rates
    assert e.prefill_flops_s == pytest.approx(truth.prefill_flops_s, rel=1e-6)
    assert e.flops_s == pytest.approx(truth.flops_s, rel=1e-6)
    assert e.batched_bandwidth_bytes_s == pytest.approx(truth.batched_bandwidth_bytes_s, rel=1e-6)
    _, tied = synthetic(
        "llamacpp",
        "meta-llama/Llama-3.2-1B",
        "cpu",
        replace(truth, prefill_flops_s=None),
        context=2048,
        parallel=4,
    )
    assert fit(engine, tied).rates.prefill_flops_s is None  # one compute explains them: none fitted


def test_a_profile_keeps_the_prefill_compute(tmp_path) -> None:
    from servelab.predict.profiles import Profile, read_profile, save_profile

    e = AchievedRates(
        bandwidth_bytes_s=2.0e10,
        flops_s=7.0e10,
        source="calibration",
        batched_bandwidth_bytes_s=1.0e10,
        prefill_flops_s=9e10,
    )
    path = save_profile(
        Profile(
            machine="cpu:x",
            machine_label="x",
            engine="llamacpp",
            quant="F16",
            rates=e,
            created="2025-01-01T00:00:00Z",
            runs=("r",),
            model="m",
            fit={},
        ),
        tmp_path,
    )
    assert read_profile(path).rates == e
    old = path.read_text().replace('"prefill_flops_s": 90000000000.0', '"prefill_flops_s": null')
    path.write_text(old)
    assert read_profile(path).rates.prefill_flops_s is None

"""Bands and provenance of predicted figures (predict/bands.py, machine.price, speeds.py): where each figure's
parameters came from, the band it is expected within, a stale calibration, and plan and predict pricing alike."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from servelab.cli.output import to_jsonable
from servelab.errors import ConfigError
from servelab.hardware.bandwidth import Bandwidth
from servelab.hardware.cpu import CPU
from servelab.hardware.gpus import find_gpu
from servelab.hardware.host import cpu_device
from servelab.model.load import load_model
from servelab.plan.make import make_plan
from servelab.predict.bands import (
    LEVEL_FIGURES,
    Pricing,
    Provenance,
    figure_factors,
    level_batch,
    predicted_figures,
    scaled,
    with_band,
)
from servelab.predict.machine import emulated_engine, planner_rates, price
from servelab.predict.profiles import Profile, same_release, stale_reason
from servelab.predict.roofline import AchievedRates
from servelab.predict.speeds import priced_decode_tok_s, priced_plan, priced_prefill_tok_s
from servelab.predict.stepmodel import STEP_MODEL_ENV, StepModel, load_step_model
from servelab.results.level_key import Level
from servelab.results.stats import Distribution, LevelStats
from servelab.sizing.types import Plan

# a test-made model: priors but a host overhead, and bands keyed as crossval.bands writes them (corpus spelling)
FIXTURE = StepModel(
    {"vllm.host": 2e-3},
    {"note": "test fixture"},
    {
        "vllm|hbm|TPOT/ITL|2-16": (0.8, 1.5),
        "llamacpp|*|TTFT|*": (0.6, 1.4),
        "*|*|output tok/s|*": (0.7, 1.2),
    },
)


def _profile(version: str | None) -> Profile:
    return Profile(
        machine="h100-sxm",
        machine_label="H100 SXM",
        engine="vllm",
        quant="bf16",
        rates=AchievedRates(
            bandwidth_bytes_s=2e12,
            flops_s=5e14,
            step_overhead_s=1e-3,
            token_overhead_s=0.0,
            source="calibration",
        ),
        created="2026-12-01T00:00:00+00:00",
        runs=("r1",),
        model="Qwen/Qwen3-8B",
        fit={"r2": 0.99},
        engine_version=version,
    )


def _plan(gpu: str = "h100"):
    card = find_gpu(gpu)
    spec = load_model("Qwen/Qwen3-8B")
    return make_plan(spec, card, engine="vllm", quant="bf16", context=8192), spec, card


def test_a_band_reads_as_the_figure_and_its_range() -> None:
    assert with_band(21.34, (17.2, 26.4)) == "21.3 (17-26)"
    assert with_band(4.0, (3.46, 5.04)) == "4.0 (3.5-5.0)"
    assert with_band(0.512, (0.41, 0.633), 3) == "0.512 (0.41-0.63)"
    assert with_band(9.9, None) == "9.9"
    assert with_band(None, (1.0, 2.0)) == "-"


def test_a_rate_takes_the_inverse_of_its_time_band() -> None:
    assert scaled(10.0, (0.8, 1.5)) == (8.0, 15.0)
    low, high = scaled(100.0, (0.8, 1.5), inverse=True) or (0, 0)
    assert low == pytest.approx(100 / 1.5) and high == pytest.approx(125.0)
    assert scaled(1.0, None) is None


def test_only_the_corpus_fit_gives_a_band_its_regimes_first_then_coarser() -> None:
    corpus = Pricing(
        AchievedRates(bandwidth_bytes_s=1e12, flops_s=1e14),
        Provenance("corpus", "fit"),
        FIXTURE,
        "vllm",
        "hbm",
    )
    assert corpus.band("TPOT/ITL", 4) == (0.8, 1.5)  # its regime
    assert corpus.band("TPOT/ITL", 1) is None  # another batch range, and no coarser TPOT band
    assert corpus.band("output tok/s", 64) == (0.7, 1.2)  # the figure's band over every engine
    llama = Pricing(
        AchievedRates(bandwidth_bytes_s=1e12, flops_s=1e14),
        Provenance("corpus", "fit"),
        FIXTURE,
        "llamacpp",
        "gddr",
    )
    assert llama.band("TTFT", 1) == (
        0.6,
        1.4,
    )  # bands are keyed by the registry name; asked as "llama.cpp" or "llamacpp"
    calibrated = Pricing(
        AchievedRates(bandwidth_bytes_s=1e12, flops_s=1e14),
        Provenance("calibration", "mine"),
        FIXTURE,
        "vllm",
        "hbm",
    )
    assert calibrated.band("TPOT/ITL", 4) is None


def test_a_level_keeps_each_banded_figure_with_its_source() -> None:
    stats = LevelStats(
        level=Level.closed(4),
        ttft_ms=Distribution(p50=50.0, p99=90.0),
        tpot_ms=Distribution(p50=20.0),
        itl_ms=Distribution(p50=19.0),
        per_stream_tok_s=Distribution(p50=50.0),
        output_tok_s=180.0,
    )
    pricing = Pricing(
        AchievedRates(bandwidth_bytes_s=1e12, flops_s=1e14),
        Provenance("corpus", "fit"),
        FIXTURE,
        "vllm",
        "hbm",
    )
    got = predicted_figures(stats, pricing)
    assert got["source"] == "corpus" and got["stale"] is None and got["batch"] == 4
    figures = got["figures"]
    assert figures["tpot_ms_p50"] == {
        "value": 20.0,
        "band": [16.0, 30.0],
        "band_of": "TPOT/ITL",
        "source": "corpus",
    }
    assert figures["per_stream_tok_s_p50"]["band"] == pytest.approx([50 / 1.5, 62.5])
    assert figures["output_tok_s"]["band"] == pytest.approx([126.0, 216.0])
    assert figures["ttft_ms_p50"]["band"] is None  # vLLM has no TTFT band in the fixture
    assert "ttft_ms_p99" not in figures  # the corpus's figures are medians: no band for a tail
    plan = predicted_figures(
        stats, Pricing(AchievedRates(bandwidth_bytes_s=1e12, flops_s=1e14), Provenance("plan", "priors"))
    )
    assert plan["source"] == "plan" and all(f["band"] is None for f in plan["figures"].values())


def test_without_serving_rows_a_time_takes_its_llama_bench_rates_band_inverted() -> None:
    bench = StepModel(
        {}, {}, {"llamacpp|gddr|pp tok/s|1": (0.5, 2.5), "llamacpp|gddr|tg tok/s|1": (0.9, 1.1)}
    )
    pricing = Pricing(
        AchievedRates(bandwidth_bytes_s=1e12, flops_s=1e14),
        Provenance("corpus", "fit"),
        bench,
        "llamacpp",
        "gddr",
    )
    stats = LevelStats(
        level=Level.closed(1),
        ttft_ms=Distribution(p50=100.0),
        tpot_ms=Distribution(p50=10.0),
        per_stream_tok_s=Distribution(p50=100.0),
        output_tok_s=99.0,
    )
    figures = predicted_figures(stats, pricing)["figures"]
    assert (
        figures["ttft_ms_p50"]["band"] == pytest.approx([40.0, 200.0])
        and figures["ttft_ms_p50"]["band_of"] == "pp tok/s"
    )
    assert figures["tpot_ms_p50"]["band"] == pytest.approx([10 / 1.1, 10 / 0.9])
    assert figures["per_stream_tok_s_p50"]["band"] == pytest.approx([90.0, 110.0])
    assert figures["output_tok_s"]["band"] is None and figures["output_tok_s"]["band_of"] is None


def test_an_open_loop_level_takes_its_band_at_the_requests_in_flight() -> None:
    stats = LevelStats(level=Level.open(4.0), request_s=4.0, e2e_ms=Distribution(mean=2500.0))
    assert level_batch(stats) == 10  # Little's law: 4 requests/s x 2.5 s
    assert level_batch(LevelStats(level=Level.open(4.0))) == 1


def test_a_release_is_the_same_whatever_detail_a_build_adds() -> None:
    assert same_release("b4567", "b4567 (1a2b3c)") and same_release("v0.8.5", "0.8.5")
    assert not same_release("0.8.5", "0.9.0") and not same_release("b4567", "b4568")


def test_a_profile_measured_on_another_release_is_stale() -> None:
    assert "0.8.5" in (stale_reason(_profile("0.8.5"), "0.11.0") or "")
    assert stale_reason(_profile("0.11.0"), "v0.11.0") is None
    assert stale_reason(_profile(None), "0.11.0") is None  # nothing to compare
    assert stale_reason(_profile("0.8.5"), None) is None


def test_price_takes_calibration_then_the_corpus_on_a_gpu_then_the_plan() -> None:
    plan, spec, card = _plan()
    stale_plan = dataclasses.replace(plan, details={**plan.details, "engine_version": "0.11.0"})
    calibrated = price(stale_plan, card, spec, profile=_profile("0.8.5"), step_model=FIXTURE)
    assert calibrated.provenance.source == "calibration" and calibrated.rates.bandwidth_bytes_s == 2e12
    assert calibrated.provenance.stale is not None and "0.8.5" in calibrated.provenance.stale
    corpus = price(plan, card, spec, step_model=FIXTURE)
    assert corpus.provenance.source == "corpus" and corpus.gpu_class == "hbm"
    assert corpus.rates.step_overhead_s == 2e-3  # the fitted value, not the plan's 0
    alone = price(plan, card, spec)
    assert alone.provenance.source == "plan" and alone.rates == planner_rates(plan, card, spec)


def test_the_cpu_device_is_never_priced_by_the_corpus() -> None:
    spec = load_model("meta-llama/Llama-3.2-1B")
    cpu = cpu_device(
        CPU(
            model="AMD EPYC",
            vendor="AuthenticAMD",
            physical_cores=2,
            logical_cpus=2,
            flags=("avx2", "fma"),
            frequency_mhz=2600.0,
            frequency_source="test",
            memory_bytes=32 << 30,
            numa_nodes=1,
            numa_node_memory_bytes=16 << 30,
            llc_bytes=32 << 20,
        ),
        Bandwidth((19.0,), (20.0,), 2, 128 << 20, "2026-12-01T10:00:00Z"),
    )
    plan = make_plan(spec, cpu, engine="llamacpp", quant="q8_0", context=2048)
    got = price(plan, cpu, spec, step_model=FIXTURE)
    assert got.provenance.source == "plan" and got.model is None
    assert "no calibration profile" in got.provenance.detail


def test_the_step_model_file_is_read_from_the_environment(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "model.json"
    path.write_text(json.dumps(FIXTURE.to_json()))
    monkeypatch.setenv(STEP_MODEL_ENV, str(path))
    got = load_step_model()
    assert got is not None and got.values == FIXTURE.values and got.bands["llamacpp|*|TTFT|*"] == (0.6, 1.4)
    path.write_text("{not json")
    with pytest.raises(ConfigError, match=r"step model .* is unreadable"):
        load_step_model()


def test_plan_states_the_speeds_predict_prices_with_their_bands() -> None:
    plan, spec, card = _plan()
    pricing = price(plan, card, spec, step_model=FIXTURE)
    got = priced_plan(plan, spec, card, pricing)
    roofline = emulated_engine(plan, spec, card, pricing=pricing).roofline  # the engine predict emulates
    short = plan.decode_expected_tok_s.short_context
    assert got.decode_expected_tok_s.short == round(priced_decode_tok_s(roofline, short), 2)
    assert got.decode_expected_tok_s.short != plan.decode_expected_tok_s.short  # the fit's 2 ms step moved it
    assert got.speeds.prefill_short_tok_s == round(priced_prefill_tok_s(roofline, short), 1)
    point = next(p for p in got.decode_batch_tok_s if p.batch == 4)
    assert point.expected_aggregate_tok_s == round(priced_decode_tok_s(roofline, point.context, 4), 1)
    low, high = got.speeds.bands["batch_short:4"]  # TPOT band (0.8, 1.5) of a rate: (1/1.5, 1/0.8)
    assert low == pytest.approx(point.expected_aggregate_tok_s / 1.5, rel=1e-3)
    assert high == pytest.approx(point.expected_aggregate_tok_s / 0.8, rel=1e-3)
    assert "decode_short" not in got.speeds.bands  # batch 1 has no band in the fixture
    assert got.speeds.source == "corpus"
    assert Plan.from_json(json.loads(json.dumps(to_jsonable(got)))) == got  # a saved plan keeps them
    kept = priced_plan(plan, spec, card, price(plan, card, spec))
    assert kept.decode_expected_tok_s == plan.decode_expected_tok_s and kept.speeds.source == "plan"


def test_a_serving_figure_takes_every_engines_serving_band_before_a_llama_bench_one() -> None:
    """llama.cpp's TTFT without a TTFT band of its own takes the TTFT band over every engine (queueing is in a
    served TTFT, not in a llama-bench prompt rate); the prompt-rate band (inverted) only where no TTFT band exists."""
    bands = {"*|*|TTFT|*": (0.15, 6.0), "llamacpp|*|pp tok/s|*": (0.8, 1.25), "*|*|tg tok/s|*": (0.9, 1.1)}
    rates = AchievedRates(bandwidth_bytes_s=1e12, flops_s=1e14)
    llama = Pricing(rates, Provenance("corpus", "fit"), StepModel({}, {}, bands), "llamacpp", "gddr")
    ttft = next(f for f in LEVEL_FIGURES if f.key == "ttft_ms_p50")
    assert figure_factors(llama, ttft, 4) == ((0.15, 6.0), "TTFT")
    del bands["*|*|TTFT|*"]
    llama = Pricing(rates, Provenance("corpus", "fit"), StepModel({}, {}, bands), "llamacpp", "gddr")
    assert figure_factors(llama, ttft, 4) == ((1 / 1.25, 1 / 0.8), "pp tok/s")
    tpot = next(f for f in LEVEL_FIGURES if f.key == "tpot_ms_p50")
    assert figure_factors(llama, tpot, 4) == ((1 / 1.1, 1 / 0.9), "tg tok/s")

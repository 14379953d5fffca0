"""The GPU step model: corpus rows mapped to servelab's inputs, replays that price as the emulator does, and the
fit recovering known parameters from rows made with them."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest

from servelab.hardware.gpus import find_gpu
from servelab.predict.corpus.fit import fit_figures, measured_figures, predicted
from servelab.predict.corpus.harness import (
    figures,
    pass_log,
    predict_row,
    quant_name,
    resolve_model,
    setup,
    step_times,
)
from servelab.predict.corpus.recorded import record
from servelab.predict.corpus.schema import Measurement, Source, Workload
from servelab.predict.stepmodel import StepModel, prior, prior_model, regime

SOURCE = Source("synthetic", "https://example.org/s", "synthetic rows", "2026-12-01", "llama-bench")
SERVING = Source(
    "synthetic-serve", "https://example.org/v", "synthetic serving", "2026-12-01", "vllm bench serve"
)


def _row(i: int = 0, source: Source = SOURCE, **over: object) -> Measurement:
    values: dict[str, object] = dict(
        source=source,
        index=i,
        engine="llama.cpp",
        engine_release="b6100",
        backend="cuda",
        model="meta-llama/Llama-3.1-8B",
        model_kind="dense",
        params_b=8.0,
        active_params_b=8.0,
        weight_format="Q4_K",
        kv_dtype="f16",
        gpu="rtx4090",
        gpu_label="RTX 4090",
        gpu_count=1,
        workload=Workload(prompt_tokens=512, output_tokens=0, concurrency=1, dataset="llama-bench"),
        figures={"pp_tok_s": 1000.0},
        verbatim=("| x |",),
    )
    values.update(over)
    return Measurement(**values)  # type: ignore[arg-type]


def test_a_llama_bench_name_maps_to_its_catalog_model_and_gguf_mix() -> None:
    row = _row(model="Meta Llama 3 8B Q4_K_M", weight_format="Q4_K")
    model = resolve_model(row)
    assert not isinstance(model, str) and model.name == "meta-llama/Llama-3.1-8B"
    assert quant_name(row) == "Q4_K_M"
    assert quant_name(_row(engine="vllm", weight_format="int4 (Marlin WNA16, BF16 scales)")) == "int4"
    s = setup(row)
    assert not isinstance(s, str)
    assert s.plan.quant == "Q4_K_M" and s.gpu.name == "rtx4090" and s.layers == 32
    assert s.regime.engine == "llamacpp" and s.regime.family == "q4_k" and s.regime.unit == "int8"


def test_an_architecture_file_and_the_rows_that_cannot_be_predicted() -> None:
    gemma = resolve_model(_row(model="gemma3 4B Q4_0"))
    assert not isinstance(gemma, str) and gemma.name == "google/gemma-3-4b-it" and gemma.num_layers == 34
    assert "Nemotron-H" in str(resolve_model(_row(model="nemotron 4B Q8_0")))
    assert "not in the catalog" in str(setup(_row(gpu=None, gpu_label="RTX 3070")))


def test_the_math_units_follow_the_kernels() -> None:
    assert regime("llamacpp", find_gpu("m2-ultra"), "Q4_0", backend="metal").unit == "fp16"
    assert regime("llamacpp", find_gpu("rtx4090"), "bf16").unit == "bf16"
    assert regime("vllm", find_gpu("h100-sxm"), "fp8").unit == "fp8"
    assert regime("vllm", find_gpu("a100-80g"), "fp8").unit == "fp16"  # no FP8 units: Marlin
    assert regime("vllm", find_gpu("b200"), "nvfp4").unit == "fp8"  # the catalog states no FP4 figure
    assert regime("sglang", find_gpu("h200"), "awq", eager=True).names()["launch"] == "sglang.launch.eager"


def test_llama_bench_rows_replay_one_sequence() -> None:
    pp = setup(
        _row(workload=Workload(prompt_tokens=2048, output_tokens=0, depth=4096, dataset="llama-bench"))
    )
    tg = setup(
        _row(
            workload=Workload(prompt_tokens=0, output_tokens=128, depth=4096, dataset="llama-bench"),
            figures={"tg_tok_s": 100.0},
        )
    )
    assert not isinstance(pp, str) and not isinstance(tg, str)
    t = pass_log(pp, prior_model())
    assert t.steps == 1 and len(t.passes) == 4  # n_batch 2048 per step, n_ubatch 512 per pass
    assert t.figures["pp_tok_s"].count == 2048
    t = pass_log(tg, prior_model())
    assert t.steps == 128 and (t.step_tokens == 1).all()
    assert t.passes[-1, 1] > t.passes[0, 1]  # the KV read grows with the context


def test_a_pass_log_prices_as_the_emulator_did() -> None:
    """Replayed steps priced again under the same figures give the figures the replay produced; under the
    step model the serving row's figures come from the emulated scheduler."""
    row = _row(
        source=SERVING,
        engine="vllm",
        weight_format="bf16",
        model="Qwen/Qwen3-8B",
        gpu="h100-sxm",
        workload=Workload(prompt_tokens=512, output_tokens=64, concurrency=4, num_prompts=12),
        figures={"ttft_ms_median": 50.0, "tpot_ms_median": 10.0, "output_tok_s": 300.0},
    )
    s = setup(row)
    assert not isinstance(s, str)
    model = StepModel({"vllm.host": 2e-3, "vllm.launch.graphs": 1e-5})
    t = pass_log(s, model)
    e = model.rates(s.regime, s.gpu, s.layers)
    assert set(t.figures) >= {"ttft_ms_median", "tpot_ms_median", "output_tok_s", "itl_ms_median"}
    again = figures(t, e)
    assert predict_row(s, model) == pytest.approx({k: again[k] for k in row.figures}, rel=1e-9)
    # a step's time is the roofline's: a decode step of 4 pays the host and launch floors once
    assert step_times(t, e).min() > 2e-3 + 36 * 1e-5
    # the plan alone (no step model) has no floor
    assert predict_row(s, None)["tpot_ms_median"] < predict_row(s, model)["tpot_ms_median"]


def _synthetic(truth: StepModel) -> list[Measurement]:
    """Rows whose figures are what `truth` predicts: pp, tg and batched tg at two depths, two models in two formats
    on two cards."""
    rows, i = [], 0
    for gpu, backend in (("rtx4090", "cuda"), ("m2-ultra", "metal")):
        for model, fmt, depth in itertools.product(
            ("meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.2-1B"), ("Q4_0", "Q8_0"), (0, 8192)
        ):
            for w, fig in (
                (Workload(prompt_tokens=512, output_tokens=0, depth=depth), "pp_tok_s"),
                (Workload(prompt_tokens=0, output_tokens=64, depth=depth), "tg_tok_s"),
                (
                    Workload(
                        prompt_tokens=512,
                        output_tokens=32,
                        batch=8,
                        depth=depth,
                        dataset="llama-batched-bench",
                    ),
                    "tg_tok_s",
                ),
            ):
                src = dataclasses.replace(SOURCE, id=f"synthetic-{gpu}")
                row = _row(
                    i,
                    src,
                    gpu=gpu,
                    backend=backend,
                    model=model,
                    weight_format=fmt,
                    workload=w,
                    figures={fig: 1.0},
                )
                s = setup(row)
                assert not isinstance(s, str)
                value = predict_row(s, truth)[fig]
                rows.append(dataclasses.replace(row, figures={fig: value}))
                i += 1
    return rows


def test_the_fit_recovers_the_parameters_the_rows_were_made_with() -> None:
    truth = StepModel(
        {
            "llamacpp.weights.q4_0": 0.5,
            "llamacpp.weights.q8_0": 0.3,
            "llamacpp.memory.gddr": 1.1,
            "llamacpp.memory.apple": 1.2,
            "llamacpp.kv": 1.5,
            "llamacpp.compute.int8": 3.0,
            "llamacpp.compute.fp16": 1.0,
            "llamacpp.backend.cuda": 1.0,
            "llamacpp.backend.metal": 1.0,
            "llamacpp.attention": 4.0,
            "llamacpp.launch.graphs": 8e-6,
            "llamacpp.host": 3e-4,
            "llamacpp.token": 0.0,
        }
    )
    rows = _synthetic(truth)
    data = []
    for row in rows:
        s = setup(row)
        assert not isinstance(s, str)
        data += measured_figures(record(s, pass_log(s, prior_model())))
    before = [abs(predicted(t, prior_model()) / t.measured - 1) for t in data]
    assert np.median(before) > 0.2
    # with the priors' pull near zero the fit explains every figure and returns what the rows pin down: the
    # floor of a one-pass step (its layers' launches and the host's share, told apart by the two models'
    # layer counts), each format x memory class's bytes (their sum: a share can move between the two terms),
    # the KV reads and the attention
    result = fit_figures(data, pull=1e-4)
    errors = [abs(predicted(t, result.model) / t.measured - 1) for t in data]
    assert max(errors) < 1e-3
    got = result.model
    assert got.value("llamacpp.launch.graphs") == pytest.approx(8e-6, rel=0.2)
    assert got.value("llamacpp.host") == pytest.approx(3e-4, rel=0.1)
    assert got.value("llamacpp.kv") == pytest.approx(1.5, rel=0.01)
    assert got.value("llamacpp.attention") == pytest.approx(4.0, rel=0.01)
    for fam in ("q4_0", "q8_0"):
        for cls in ("gddr", "apple"):
            fitted = got.value(f"llamacpp.weights.{fam}") + got.value(f"llamacpp.memory.{cls}")
            true = truth.value(f"llamacpp.weights.{fam}") + truth.value(f"llamacpp.memory.{cls}")
            assert fitted == pytest.approx(true, rel=0.01)
    # the default pull keeps the parameters near their priors where few rows speak: still far better than them
    pulled = fit_figures(data)
    assert np.median([abs(predicted(t, pulled.model) / t.measured - 1) for t in data]) < 0.05


def test_a_parameter_no_row_touches_keeps_its_prior() -> None:
    assert prior_model().value("vllm.weights.fp8") == prior("vllm.weights.fp8")[0]
    assert prior("llamacpp.host") == (0.0, 1e-3)
    assert prior("vllm.memory.hbm")[0] == 1.0 and prior("sglang.allreduce")[0] == 1.0


def test_bands_come_from_the_left_out_rows_of_their_regime() -> None:
    from servelab.predict.corpus.crossval import CrossValidation, FigurePrediction, bands

    row = _row(figures={"tg_tok_s": 100.0}, workload=Workload(prompt_tokens=0, output_tokens=64))
    s = setup(row)
    assert not isinstance(s, str)
    cv = CrossValidation(
        "source",
        [
            FigurePrediction(s, "tg_tok_s", 100.0, 100.0 / r, "x")
            for r in (0.8, 0.9, 1.0, 1.0, 1.1, 1.2, 1.3, 0.7, 1.0, 1.05, 0.95)
        ],
    )
    table = bands(cv)
    model = StepModel({}, {}, {k: (v[0], v[1]) for k, v in table.items()})
    lo, hi = model.band("llama.cpp", "gddr", "tg tok/s", 1) or (0.0, 0.0)
    assert lo == pytest.approx(0.8) and hi == pytest.approx(1.2)
    assert model.band("llama.cpp", "hbm", "tg tok/s", 1) == (lo, hi)  # the engine's figure-wide band
    assert model.band("vllm", "hbm", "TTFT", 8) is None


def test_a_fitted_model_round_trips_through_its_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import json

    from servelab.predict.stepmodel import load_step_model

    model = StepModel(
        {"vllm.host": 1e-3, "vllm.memory.hbm": 1.3}, {"fitted": "2026-12-02"}, {"*|*|TTFT|*": (0.7, 1.4)}
    )
    path = tmp_path / "stepmodel.json"
    path.write_text(json.dumps(model.to_json()), encoding="utf-8")
    again = load_step_model(path)
    assert again == model
    e = again.rates(regime("vllm", find_gpu("h200"), "bf16"), find_gpu("h200"), 36)
    weights = prior("vllm.weights.16-bit")[0]
    assert e.step_overhead_s == 1e-3 and e.bandwidth_bytes_s == pytest.approx(4800e9 / (weights + 1.3))
    assert e.pass_overhead_s == 0.0 and e.source == "corpus"


def test_decode_and_prompt_matmuls_run_at_their_own_compute() -> None:
    """A batch of decodes multiplies at d[engine, backend], a prompt at c[engine, unit] + b[backend]: a slow
    decode kernel slows batched decode and leaves prompt processing as it was."""
    gpu = find_gpu("m2-ultra")
    r = regime("llamacpp", gpu, "Q4_0", backend="metal")
    slow = StepModel({"llamacpp.decode.metal": 40.0})
    e = slow.rates(r, gpu, 34)
    assert e.flops_s == pytest.approx(gpu.tensor_flops(r.unit) / 40)
    c = prior("llamacpp.compute.fp16")[0] + prior("llamacpp.backend.metal")[0]
    assert e.prefill_flops_s == pytest.approx(gpu.tensor_flops(r.unit) / c)
    batched = _row(
        gpu="m2-ultra",
        backend="metal",
        weight_format="Q4_0",
        figures={"tg_tok_s": 1.0},
        workload=Workload(prompt_tokens=512, output_tokens=16, batch=16, dataset="llama-batched-bench"),
    )
    pp = _row(gpu="m2-ultra", backend="metal", weight_format="Q4_0")
    for row, changes in ((batched, True), (pp, False)):
        s = setup(row)
        assert not isinstance(s, str)
        (name,) = row.figures
        before, after = predict_row(s, prior_model())[name], predict_row(s, slow)[name]
        assert (after < before * 0.9) if changes else after == pytest.approx(before, rel=1e-9)

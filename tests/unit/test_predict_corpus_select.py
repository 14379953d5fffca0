"""What ships of the corpus fit (predict/corpus/select.py): each engine's λ and fit-or-priors chosen by
leave-one-source-out, the engines kept at their priors dropped from the shipped values, and bands whose quantiles
are the narrowest that hold 80% of the left-out figures."""

from __future__ import annotations

import dataclasses

import pytest

from servelab.predict.corpus.crossval import CrossValidation, FigurePrediction, Prepared, band_coverage
from servelab.predict.corpus.harness import pass_log, setup
from servelab.predict.corpus.recorded import record
from servelab.predict.corpus.schema import Source, Workload
from servelab.predict.corpus.select import COVER, QUANTILES, Selection, calibrated_quantiles, choose
from servelab.predict.stepmodel import StepModel, prior_model
from tests.unit.test_predict_stepmodel import _row, _synthetic


def _cv(ratios: list[float]) -> CrossValidation:
    row = _row(figures={"tg_tok_s": 100.0}, workload=Workload(prompt_tokens=0, output_tokens=64))
    s = setup(row)
    assert not isinstance(s, str)
    return CrossValidation(
        "source",
        [FigurePrediction(s, "tg_tok_s", 100.0, 100.0 / r, f"fold{i}") for i, r in enumerate(ratios)],
    )


def test_the_band_quantiles_are_the_narrowest_that_cover_the_left_out_figures() -> None:
    cv = _cv([0.5 + i * 0.05 for i in range(21)])
    got = calibrated_quantiles(cv)
    pair = got["quantiles"]["tg tok/s"]
    share = {q: band_coverage(cv, *q)["tg tok/s"] for q in QUANTILES}
    assert share[pair][0] / share[pair][1] >= COVER
    narrower = QUANTILES[: QUANTILES.index(pair)]
    assert narrower and all(share[q][0] / share[q][1] < COVER for q in narrower)  # 10-90% was too narrow here
    assert got["coverage"]["source"]["tg tok/s"][f"{pair[0]:g}-{pair[1]:g}"] == pytest.approx(
        share[pair][0] / share[pair][1], abs=1e-4
    )


def test_an_engine_kept_at_its_priors_ships_none_of_its_fitted_values() -> None:
    from servelab.predict.corpus.select import EngineChoice

    fit = EngineChoice("llamacpp", 0.1, True, {}, {}, {})
    kept = EngineChoice("vllm", 1.0, False, {}, {}, {})
    selection = Selection({"llamacpp": fit, "vllm": kept}, CrossValidation("source"))
    model = StepModel({"llamacpp.kv": 1.5, "vllm.kv": 3.0, "vllm.host": 1e-3})
    shipped = selection.shipped(model)
    assert shipped.values == {"llamacpp.kv": 1.5}
    assert shipped.value("vllm.kv") == prior_model().value("vllm.kv")
    assert selection.pulls == {"llamacpp": 0.1, "vllm": 1.0}


def test_a_fit_that_beats_the_priors_out_of_sample_ships() -> None:
    """Rows made by parameters far from the priors, two sources that each hold both cards: each fold's fit
    predicts the other source, so the engine's fit ships at the λ with the least left-out error."""
    truth = StepModel(
        {
            "llamacpp.weights.q4_0": 0.5,
            "llamacpp.weights.q8_0": 0.3,
            "llamacpp.memory.gddr": 1.1,
            "llamacpp.memory.apple": 1.2,
            "llamacpp.kv": 1.5,
            "llamacpp.compute.int8": 3.0,
            "llamacpp.compute.fp16": 1.0,
            "llamacpp.attention": 4.0,
            "llamacpp.host": 3e-4,
        }
    )
    halves = [
        Source(f"synthetic-{h}", "https://example.org/s", "synthetic", "2026-12-01", "llama-bench")
        for h in "ab"
    ]
    rows = [dataclasses.replace(r, source=halves[i % 2]) for i, r in enumerate(_synthetic(truth))]
    recorded = []
    for row in rows:
        s = setup(row)
        assert not isinstance(s, str)
        recorded.append(record(s, pass_log(s, prior_model())))
    selection = choose(Prepared(tuple(recorded), ()), pulls=(1e-3, 10.0))
    c = selection.choices["llamacpp"]
    assert c.use_fit and c.pull == 1e-3
    assert c.grid[1e-3] < c.grid[10.0] and c.fit["all"] < c.priors["all"] / 5
    assert len(selection.loso.predictions) == sum(len(r.figures) for r in recorded)

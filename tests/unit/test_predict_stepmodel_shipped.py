"""The fitted step model servelab ships (servelab/predict/stepmodel.json, written by
`python benchmarks/predict_vs_public.py --write`): it loads, every value is a parameter of the model with a
physical sign, it names the corpus files it came from, and its bands cover the regimes of the corpus."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from servelab.hardware.gpus import find_gpu
from servelab.predict.corpus import load_corpus
from servelab.predict.corpus.crossval import FIGURE_GROUPS
from servelab.predict.stepmodel import load_step_model, prior, regime

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def shipped():  # type: ignore[no-untyped-def]
    model = load_step_model()
    assert model is not None, (
        "servelab/predict/stepmodel.json is missing: run benchmarks/predict_vs_public.py --write"
    )
    return model


def test_every_value_is_a_known_parameter_and_non_negative(shipped) -> None:  # type: ignore[no-untyped-def]
    assert shipped.values
    for name, value in shipped.values.items():
        prior(name)  # raises on a name the model does not have
        assert value >= 0 and math.isfinite(value), name


def test_it_names_the_corpus_files_and_the_command_it_came_from(shipped) -> None:  # type: ignore[no-untyped-def]
    p = shipped.provenance
    assert "predict_vs_public.py --write" in p["command"]
    files = p["files"]
    assert files and all((ROOT / f).is_file() for f in files)
    shipped_sources = {row.source.id for row in load_corpus()}
    assert set(p["sources"]) <= shipped_sources


def test_its_bands_cover_every_engine_and_figure_of_the_corpus(shipped) -> None:  # type: ignore[no-untyped-def]
    """Each engine's rows in the corpus get a band for each figure the fit predicted of them, and a band holds
    its prediction (lo <= 1 <= hi is not required: a biased regime's band may sit to one side)."""
    fitted = set(shipped.provenance["sources"])
    wanted = {
        (row.engine, FIGURE_GROUPS[f])
        for row in load_corpus()
        if row.source.id in fitted and not row.excluded
        for f in row.figures
        if f in FIGURE_GROUPS
    }
    for engine, group in sorted(wanted):
        band = shipped.band(engine, "hbm", group, 8)
        assert band is not None, (engine, group)
        lo, hi = band
        assert 0 < lo <= hi, (engine, group)


def test_the_shipped_model_prices_a_card(shipped) -> None:  # type: ignore[no-untyped-def]
    gpu = find_gpu("h100-sxm")
    e = shipped.rates(regime("vllm", gpu, "bf16"), gpu, 36)
    assert 0 < e.bandwidth_bytes_s <= gpu.bandwidth_bytes_s * 1.5
    assert e.flops_s > 0


def test_no_engine_ships_a_fit_worse_than_its_priors_under_cross_validation(shipped) -> None:  # type: ignore[no-untyped-def]
    """Each engine's choice is in the provenance (predict/corpus/select.py): an engine whose fit ships is no worse
    than its priors in any figure left out by source; an engine kept at its priors ships none of its values."""
    engines = shipped.provenance["engines"]
    assert engines
    for engine, choice in engines.items():
        own = [n for n in shipped.values if n.partition(".")[0] == engine]
        if choice["uses"] == "fit":
            fit, priors = choice["loso_median_abs_error"], choice["priors_median_abs_error"]
            assert all(fit[g] <= priors[g] for g in fit if g != "all"), engine
            assert own, engine
        else:
            assert choice["uses"] == "priors" and not own, engine
        assert choice["pull"] in (float(k) for k in choice["pull_grid"])


def test_its_band_quantiles_cover_80_percent_out_of_sample(shipped) -> None:  # type: ignore[no-untyped-def]
    """The bands' quantiles were chosen so that 80% of left-out figures fall inside (where a pair of the grid
    could), and the coverage each cross-validation gave is recorded."""
    quantiles, coverage = shipped.provenance["band_quantiles"], shipped.provenance["band_coverage"]
    assert set(coverage) == {"source", "gpu"}
    for group, (lo, hi) in quantiles.items():
        assert 0 <= lo < 0.5 < hi <= 1, group
        if (lo, hi) != (0.0, 1.0):
            assert all(coverage[kind][group] >= 0.8 for kind in coverage), group

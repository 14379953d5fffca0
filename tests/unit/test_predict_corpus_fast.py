"""The cross-validation's fast paths give what the plain ones give, bit for bit: the design matrix kept from call
to call with only the rows whose groups changed side summed again, and the non-negative least squares started
from the last round's support (predict/corpus/fit.py)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from servelab.predict.corpus import fit
from servelab.predict.corpus.crossval import Prepared, leave_one_out
from servelab.predict.corpus.fit import Design, nnls
from servelab.predict.corpus.harness import pass_log, setup
from servelab.predict.corpus.recorded import (
    ROLE_COLUMN,
    ROLE_MEMORY,
    ROLES,
    SIDED_ROLES,
    memory_side,
    record,
)
from servelab.predict.corpus.schema import Source
from servelab.predict.stepmodel import StepModel, prior_model
from tests.unit.test_predict_corpus_recorded import _serving
from tests.unit.test_predict_stepmodel import _synthetic

TRUTH = StepModel(
    {
        "llamacpp.weights.q4_0": 0.5,
        "llamacpp.weights.q8_0": 0.3,
        "llamacpp.memory.gddr": 1.1,
        "llamacpp.kv": 1.5,
        "llamacpp.compute.int8": 3.0,
        "llamacpp.compute.fp16": 1.0,
        "llamacpp.attention": 4.0,
        "llamacpp.host": 3e-4,
    }
)


@pytest.fixture(scope="module")
def prepared() -> Prepared:
    """The synthetic llama-bench rows over three sources, and two vLLM serving rows (passes on both sides of
    their max) from sources of their own."""
    sources = [
        Source(f"synthetic-{k}", "https://example.org/s", "synthetic", "2026-12-01", "llama-bench")
        for k in "abc"
    ]
    rows = [dataclasses.replace(r, source=sources[i % 3]) for i, r in enumerate(_synthetic(TRUTH))]
    for k, c in enumerate((4, 32)):
        src = Source(
            f"synthetic-serve-{k}", "https://example.org/v", "synthetic", "2026-12-01", "vllm bench serve"
        )
        w = dataclasses.replace(_serving().workload, concurrency=c, num_prompts=2 * c)
        rows.append(_serving(source=src, index=k, workload=w))
    recorded = []
    for row in rows:
        s = setup(row)
        assert not isinstance(s, str)
        recorded.append(record(s, pass_log(s, prior_model())))
    return Prepared(tuple(recorded), ())


def _plain_matrix(d: Design, x: np.ndarray) -> np.ndarray:
    """Design.matrix as it was before it kept anything between calls: every target summed."""
    side = memory_side(d.groups, x[d.param][d.group_row])[d.entry_group]
    n = len(d.data)
    a = np.zeros((n, len(d.names)))
    targets_at = np.arange(n)
    params = d.param[d.target_row]
    for j in range(SIDED_ROLES):
        mask = side if ROLE_MEMORY[j] else ~side
        coef = np.bincount(d.entry_target, weights=d.entry_values[:, ROLE_COLUMN[j]] * mask, minlength=n)
        np.add.at(a, (targets_at, params[:, j]), coef)
    for j in range(SIDED_ROLES, len(ROLES)):
        np.add.at(a, (targets_at, params[:, j]), d.fixed[:, j - SIDED_ROLES])
    return a


def test_the_kept_matrix_equals_the_one_summed_afresh_as_sides_change(prepared: Prepared) -> None:
    d = prepared.design
    rng = np.random.default_rng(3)
    start = d.values(prior_model())
    sides, changed_rows = [], 0
    for k in range(12):
        # priors, then values a factor up to 30 either way: groups move between the memory and compute sides
        x = start if k == 0 else start * np.exp(rng.uniform(-3.4, 3.4, len(start))) + (k % 3 == 0) * 1e-4
        got = d.matrix(x)
        assert np.array_equal(got, _plain_matrix(d, x))
        side = memory_side(d.groups, x[d.param][d.group_row])
        if sides:
            changed_rows += len(np.unique(d.group_row[side != sides[-1]]))
        sides.append(side)
    assert changed_rows > 0  # the kept rows and the summed-again rows were both exercised
    assert not all(s.all() or not s.any() for s in sides)


def _cold(a: np.ndarray, b: np.ndarray, iterations: int = 500, free: np.ndarray | None = None) -> np.ndarray:
    return nnls(a, b, iterations)


def test_a_started_nnls_finds_what_a_cold_one_finds() -> None:
    rng = np.random.default_rng(7)
    mixed = 0
    for trial in range(40):
        m, n = (60, 12) if trial % 2 else (12, 12)
        a = rng.normal(size=(m, n))
        b = rng.normal(size=m)
        want = nnls(a, b)
        assert (want >= 0).all()
        mixed += bool((want == 0).any() and (want > 0).any())
        for guess in (want > 0, rng.uniform(size=n) < 0.5, np.ones(n, dtype=bool), np.zeros(n, dtype=bool)):
            assert np.array_equal(nnls(a, b, free=guess), want)
    assert mixed >= 30  # most solutions have some variables at their bound and some free


def test_the_cross_validation_is_the_same_with_or_without_its_fast_paths(
    prepared: Prepared, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every fold's fitted values and every left-out prediction, at two pulls and leaving GPU types out."""
    runs = [("source", 0.03), ("source", 3.0), ("gpu", {"llamacpp": 0.1, "vllm": 1.0})]
    fast = [leave_one_out(prepared, kind, pull=pull) for kind, pull in runs]
    monkeypatch.setattr(fit, "nnls", _cold)
    monkeypatch.setattr(Design, "matrix", lambda d, x: _plain_matrix(d, x))
    plain = [leave_one_out(prepared, kind, pull=pull) for kind, pull in runs]
    for f, p in zip(fast, plain, strict=True):
        assert f.fits.keys() == p.fits.keys() and len(f.fits) >= 2
        for g in f.fits:
            assert f.fits[g].model.values == p.fits[g].model.values
            assert (f.fits[g].rounds, f.fits[g].trimmed) == (p.fits[g].rounds, p.fits[g].trimmed)
        assert [(x.fold, x.figure, x.predicted) for x in f.predictions] == [
            (x.fold, x.figure, x.predicted) for x in p.predictions
        ]

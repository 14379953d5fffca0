"""A row's replay recorded once: its figures' overlap sums, and the recorded row priced under another model as a
replay priced under it would be (the folds of cross-validation never replay)."""

from __future__ import annotations

import numpy as np
import pytest

from servelab.predict.corpus.fit import Design, fit_design, measured_figures
from servelab.predict.corpus.harness import _Spans, figures, pass_log, setup
from servelab.predict.corpus.recorded import record
from servelab.predict.corpus.schema import Measurement, Source, Workload
from servelab.predict.stepmodel import StepModel, prior_model

SERVING = Source(
    "synthetic-serve", "https://example.org/v", "synthetic serving", "2026-12-01", "vllm bench serve"
)


def _naive(starts: np.ndarray, ends: np.ndarray, t0: float, t1: float) -> tuple[np.ndarray, float]:
    weights, covered = np.zeros(len(starts)), 0.0
    for k, (a, b) in enumerate(zip(starts, ends, strict=True)):
        inside = min(b, t1) - max(a, t0)
        if inside > 0 and b > a:
            weights[k] = inside / (b - a)
            covered += inside
    return weights, max(0.0, t1 - t0 - covered)


def test_overlap_sums_equal_the_step_by_step_ones() -> None:
    rng = np.random.default_rng(1)
    gaps = rng.choice([0.0, 0.0, 0.3], size=40)  # steps back to back, with idle gaps between some
    durations = rng.uniform(0.1, 1.0, size=40)
    starts = np.cumsum(gaps + np.concatenate([[0.0], durations[:-1]]))
    ends = starts + durations
    spans = _Spans(list(zip(starts, ends, strict=True)))
    t0 = rng.uniform(0, ends[-1], size=25)
    t1 = np.minimum(t0 + rng.uniform(0.0, 6.0, size=25), ends[-1] + 1)
    t1[:3] = t0[:3] + 0.01  # inside one step
    factors = rng.uniform(0.1, 2.0, size=25)
    got = spans.overlap("x", t0, t1, factors)
    want, idle = np.zeros(len(starts)), 0.0
    for a, b, f in zip(t0, t1, factors, strict=True):
        w, i = _naive(starts, ends, a, b)
        want += f * w
        idle += f * i
    dense = np.zeros(len(starts))
    dense[got.steps] = got.shares
    assert dense == pytest.approx(want, abs=1e-12)
    assert got.idle_s == pytest.approx(idle, rel=1e-9)


def _serving(**over: object) -> Measurement:
    values: dict[str, object] = dict(
        source=SERVING,
        index=0,
        engine="vllm",
        engine_release="v0.11",
        backend="cuda",
        model="Qwen/Qwen3-8B",
        model_kind="dense",
        params_b=8.0,
        active_params_b=8.0,
        weight_format="bf16",
        kv_dtype="auto",
        gpu="h100-sxm",
        gpu_label="H100",
        gpu_count=1,
        workload=Workload(prompt_tokens=2048, output_tokens=128, concurrency=16, num_prompts=48),
        figures={"ttft_ms_median": 80.0, "tpot_ms_median": 12.0, "output_tok_s": 1000.0, "itl_ms_mean": 12.0},
        verbatim=("x",),
    )
    values.update(over)
    return Measurement(**values)  # type: ignore[arg-type]


def test_a_recorded_row_prices_as_its_replay_under_any_model() -> None:
    """Priced from its groups, a recorded row gives what its replay's steps give under another model (the
    groups' sides within 2%), including passes that move from one side of the max to the other."""
    s = setup(_serving())
    assert not isinstance(s, str)
    t = pass_log(s, prior_model())
    rec = record(s, t)
    assert len(rec.groups) < len(t.passes)  # the passes are grouped
    for model in (
        prior_model(),
        StepModel({"vllm.compute.bf16": 3.0, "vllm.kv": 4.0, "vllm.host": 1e-3}),
        StepModel({"vllm.attention": 20.0, "vllm.weights.16-bit": 0.1, "vllm.launch.graphs": 2e-5}),
    ):
        want = figures(t, model.rates(s.regime, s.gpu, s.layers))
        for name in rec.figures:
            assert rec.predict(name, model) == pytest.approx(want[name], rel=0.02), name


def test_a_fold_fitted_without_a_row_does_not_move_with_its_measurement() -> None:
    """No row is predicted by parameters fitted on itself: what the fold without it predicts is the same
    whatever the row measured."""
    rows = [
        _serving(
            index=i,
            workload=Workload(
                prompt_tokens=512 * (i + 1), output_tokens=64, concurrency=2**i, num_prompts=32
            ),
        )
        for i in range(4)
    ]
    recorded = []
    for r in rows:
        s = setup(r)
        assert not isinstance(s, str)
        recorded.append(record(s, pass_log(s, prior_model())))
    data = [t for r in recorded for t in measured_figures(r)]
    design = Design(data)
    train = np.array([t.recorded is not recorded[0] for t in data])
    before = design.seconds(fit_design(design, train).model)[~train]
    changed = [
        type(t)(t.recorded, t.figure, t.measured * 3) if t.recorded is recorded[0] else t for t in data
    ]
    again = Design(changed)
    after = again.seconds(fit_design(again, train).model)[~train]
    assert after == pytest.approx(before, rel=1e-12)

"""The report draws a prediction's band: a predicted run stored by `predict` with its figures' bands (a test-made
step model) against a measured run of the same model and workload; the band is shaded in the SVG with its
tooltip escaped, and the Markdown table gives each predicted figure its band and counts the measured ones inside."""

from __future__ import annotations

import re
from pathlib import Path

from servelab.cli.bench import build_config
from servelab.hardware.gpus import find_gpu
from servelab.model.load import load_model
from servelab.plan.make import make_plan
from servelab.predict.machine import emulated_engine, price
from servelab.predict.run import PredictTarget, predict
from servelab.predict.stepmodel import StepModel
from servelab.report import assemble, render_report
from servelab.report.overlay import errors, pairs
from servelab.store import Store
from tests.runs_factory import store_run

HOSTILE = "<script>alert(1)</script>"
MODEL = StepModel(
    {}, {"note": "test-made"}, {"*|*|output tok/s|*": (0.5, 2.0), "*|*|TPOT/ITL|*": (0.25, 4.0)}
)


def _runs(tmp_path: Path, model: StepModel | None = MODEL):
    """(measured run, predicted run) in one store: the prediction's model named `HOSTILE`, as the measured one."""
    db = tmp_path / "runs.db"
    measured = store_run(db, model=HOSTILE, ladder=(1, 2, 4))
    spec, card = load_model("Qwen/Qwen3-8B"), find_gpu("h100")
    plan = make_plan(spec, card, engine="vllm", quant="bf16", context=8192)
    engine = emulated_engine(plan, spec, card, pricing=price(plan, card, spec, step_model=model))
    config = build_config(
        {"targets": ["predict"], "concurrency": "1,2,4", "workload": "short", "requests": 4, "chat": True},
        None,
    )
    with Store.open(db) as store:
        predicted = predict(
            config, engine, PredictTarget(engine="vllm", model=HOSTILE, gpu="h100", quant="bf16"), store
        ).run_id
        return store.load_run(measured), store.load_run(predicted or "")


def test_the_band_is_read_back_from_the_store_and_held_against_the_measurement(tmp_path: Path) -> None:
    measured, predicted = _runs(tmp_path)
    bill = assemble([measured, predicted], predicted_run=predicted.id)
    found = errors(pairs(bill)[0])
    tok_s = [e for e in found if e.figure == "output tok/s"]
    assert len(tok_s) == 3
    for e in tok_s:
        assert e.band is not None and e.band[0] == e.predicted * 0.5 and e.band[1] == e.predicted * 2.0
        assert e.inside == (e.band[0] <= e.measured <= e.band[1])
    assert all(e.band is None for e in found if e.figure == "TTFT p50 ms")  # the model has no TTFT band


def test_markdown_gives_each_predicted_figure_its_band_and_counts_the_measured_inside(tmp_path: Path) -> None:
    measured, predicted = _runs(tmp_path)
    markdown, _ = render_report(assemble([measured, predicted], predicted_run=predicted.id), "md")
    table = markdown[markdown.index("Predicted vs measured: ") :]
    rows = [line for line in table.splitlines() if line.startswith("| c=")]
    assert "|:--|--:|--:|--:|--:|--:|--:|--:|--:|--:|" in table  # banded cells right-aligned as numbers
    assert len(rows) == 3
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert re.fullmatch(r"[\d,.]+", cells[1])  # TTFT: no band
        assert re.fullmatch(r"[\d,.]+ \([\d.]+–[\d.]+\)", cells[4]), cells  # TPOT
        assert re.fullmatch(r"[\d,.]+ \([\d.]+–[\d.]+\)", cells[7]), cells  # output tok/s
    inside = next(line for line in table.splitlines() if line.startswith("| measured inside the band"))
    assert re.search(r"\| \d / 3 \|", inside)
    assert HOSTILE not in markdown
    assert "figures from corpus (the GPU step model fitted to the public corpus (test-made))" in markdown


def test_html_shades_the_band_with_an_escaped_tooltip(tmp_path: Path) -> None:
    measured, predicted = _runs(tmp_path)
    html, _ = render_report(assemble([measured, predicted], predicted_run=predicted.id), "html")
    plot = html[html.index('data-plot="aggregate-throughput"') :].split("</svg>")[0]
    band = re.search(r'data-role="band"[^>]*>\s*<title>([^<]*)</title>', plot)
    assert band is not None, "no band drawn"
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in band.group(1) and "c=4:" in band.group(1)
    assert "<script" not in html
    assert 'data-role="band"' in html[html.index('data-plot="per-stream"') :].split("</svg>")[0]


def test_a_prediction_without_bands_draws_none(tmp_path: Path) -> None:
    measured, predicted = _runs(tmp_path, model=None)
    html, _ = render_report(assemble([measured, predicted], predicted_run=predicted.id), "html")
    assert 'data-role="band"' not in html and "measured figures fell inside" not in html
    assert (
        "figures from plan (the plan&#x27;s sourced efficiencies" in html
        or "figures from plan (the plan's" in html
    )

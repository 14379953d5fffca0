"""The bill's "Power and the bound" section: stored power samples + the doctor's burn + the plan → the verdict.

The run is written through the real Store (SQLite in tmp_path) with synthetic "gpu_power" rows shaped as
`PowerSampler` writes them; the doctor document is the real `DoctorReport.to_json()` of a recorded machine
(tests/fixtures/doctor/one-gpu-3090, see its SOURCE.md) with a `BurnResult`, written and read as JSON.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servelab.cli.app import main
from servelab.diagnose.burn import BurnResult
from servelab.diagnose.doctor import run_doctor
from servelab.diagnose.probe import RecordedProbe
from servelab.plan.io import plan_document
from servelab.report import assemble, render_report
from servelab.report.bound import power_bounds
from servelab.report.markdown import md_text
from servelab.report.page import Para, Section, build_page
from servelab.report.verdict import verdicts
from servelab.store import Store
from tests.runs_factory import store_run

FIXTURES = Path(__file__).parent.parent / "fixtures" / "doctor"
# rtx4090: 1008 GB/s in the catalog. A memory-bound short-context ceiling of 112 tok/s means 9 GB per token;
# the stored single-stream level decodes at 100 tok/s (one token every 10 ms) → 900 GB/s.
PLAN = {
    "model": "m",
    "gpu": "rtx4090",
    "plans": [
        {
            "engine": "llamacpp",
            "quant": "q8_0",
            "context": 4096,
            "fits": True,
            "decode_ceiling_tok_s": {
                "short": 112.0,
                "full_context": 90.0,
                "short_context": 1024,
                "bound": "memory",
            },
        }
    ],
}


def _power_rows(gpu0_watts: list[float], level: str | None = "c=1", target: int = 0) -> list[dict]:
    """GPU 0 serves (SM busy); GPU 1 idles at 20 W with 0% SM and must not dilute the mean. Labelled with the
    target and level as the bench stores them; `level=None`: unlabelled, as runs stored before the labels."""
    label = {} if level is None else {"target_index": target, "level": level, "repeat": 0}
    rows = []
    for i, watts in enumerate(gpu0_watts):
        common = {
            "t_ns": i * 200_000_000,
            "mem_util_pct": 80,
            "sm_clock_mhz": 2520,
            "mem_clock_mhz": 10501,
            **label,
        }
        rows.append({**common, "gpu": 0, "power_w": watts, "sm_util_pct": 35})
        rows.append({**common, "gpu": 1, "power_w": 20.0, "sm_util_pct": 0})
    return rows


def _ladder_rows() -> list[dict]:
    """Single stream at 140-160 W, c=2 at 300-320 W: the mean over both levels (~214 W) is not the c=1 power."""
    return _power_rows([140.0, 160.0, 150.0]) + _power_rows([300.0, 320.0], "c=2")


def _run(tmp_path: Path, rows: list[dict] | None, **kwargs):
    db = tmp_path / "runs.db"
    run_id = store_run(db, ladder=(1, 2), itl_ms=10.0, **kwargs)
    with Store.open(db) as store:
        if rows:
            store.add_samples(run_id, "gpu_power", rows)
        return store.load_run(run_id)


def _doctor(tmp_path: Path, burn: BurnResult | None) -> dict:
    path = tmp_path / "doctor.json"
    path.write_text(json.dumps(run_doctor(RecordedProbe(FIXTURES / "one-gpu-3090"), burn=burn).to_json()))
    return json.loads(path.read_text())


def _burn(power_w: float = 450.0) -> BurnResult:
    return BurnResult(
        status="ok",
        backend="torch",
        seconds=20.0,
        iterations=400,
        tflops=140.0,
        power_w=power_w,
        max_power_w=power_w + 10,
        power_limit_w=450.0,
        samples=100,
    )


def _section(bill) -> Section:
    return next(s for s in build_page(bill, with_plots=False) if s.key == "power")


def _texts(section: Section, kind: str = "text") -> list[str]:
    return [b.text for b in section.blocks if isinstance(b, Para) and b.kind == kind]


def test_a_third_of_the_burn_near_the_bandwidth_ceiling_is_bandwidth_bound(tmp_path: Path) -> None:
    bill = assemble([_run(tmp_path, _ladder_rows())], plan_document(PLAN), _doctor(tmp_path, _burn()))
    _, (bound,) = power_bounds(bill)
    a = bound.analysis
    assert a.verdict == "bandwidth-bound"
    assert (a.serving_power_w, a.burn_power_w) == pytest.approx(
        (150.0, 450.0)
    )  # c=1's power, as its bandwidth
    assert (a.achieved_bandwidth_gb_s, a.bandwidth_gb_s) == pytest.approx((900.0, 1008.0))
    assert (bound.samples, bound.gpus, bound.power_level) == (3, (0,), "c=1")
    section = _section(bill)
    (sentence,) = _texts(section)
    assert sentence.startswith(
        "llamacpp · tiny-test-model · short: bandwidth-bound (mean of 3 samples on GPU 0 at c=1)"
    )
    assert "decode moved 900 GB/s of the card's 1008 GB/s (89%)" in sentence
    assert "serving drew 150 W of the burn's 450 W (33%)" in sentence
    table = section.blocks[0]
    assert table.rows == (
        (
            "llamacpp · tiny-test-model · short",
            "bandwidth-bound",
            "150",
            "c=1",
            "3",
            "450",
            "33%",
            "900",
            "1,008",
            "89%",
        ),
    )
    assert _texts(section, "note") == []
    (verdict,) = [v for v in verdicts(bill) if v.scenario == "bound"]
    assert verdict.sentence == (
        "llamacpp · tiny-test-model · short was bandwidth-bound: decode moved 900 GB/s of the card's "
        "1008 GB/s (89%); serving drew 150 W of the burn's 450 W (33%)."
    )


def test_serving_at_the_burn_power_is_compute_or_power_bound(tmp_path: Path) -> None:
    bill = assemble(
        [_run(tmp_path, _power_rows([420.0, 430.0]))], plan_document(PLAN), _doctor(tmp_path, _burn(450.0))
    )
    _, (bound,) = power_bounds(bill)
    assert bound.analysis.verdict == "compute/power-bound"
    assert bound.analysis.power_fraction == pytest.approx(425 / 450)


def test_missing_inputs_each_name_the_flag_that_supplies_them(tmp_path: Path) -> None:
    section = _section(assemble([_run(tmp_path, None)]))
    notes = _texts(section, "note")
    assert any("--doctor FILE" in n and "servelab doctor --burn --json" in n for n in notes)
    assert any("--plan FILE" in n for n in notes)
    assert any("no GPU power samples" in n and "--no-power" in n for n in notes)
    assert _texts(section) == [] and not any(
        not isinstance(b, Para) for b in section.blocks
    )  # no empty table
    assert not any(v.scenario == "bound" for v in verdicts(assemble([_run(tmp_path, None)])))


def test_a_doctor_file_without_a_burn_or_with_a_skipped_one_says_so(tmp_path: Path) -> None:
    run = _run(tmp_path, _power_rows([150.0]))
    no_burn = _texts(_section(assemble([run], plan_document(PLAN), _doctor(tmp_path, None))), "note")
    assert no_burn == [
        "The doctor file has no burn: run `servelab doctor --burn --json` on the GPU machine and "
        "pass it with --doctor FILE."
    ]
    skipped = BurnResult(status="skipped", reason="neither torch nor cupy is installed")
    section = _section(assemble([run], plan_document(PLAN), _doctor(tmp_path, skipped)))
    assert any("skipped: neither torch nor cupy is installed" in n for n in _texts(section, "note"))
    (sentence,) = _texts(section)  # the bandwidth half still stands: 89% of the card is bandwidth-bound
    assert "bandwidth-bound" in sentence and "900 GB/s" in sentence and "power fraction unknown" in sentence


def test_a_custom_plan_gpu_takes_the_bandwidth_doctor_found(tmp_path: Path) -> None:
    plan = {**PLAN, "gpu": "custom"}  # the recorded RTX 3090: 936 GB/s in the catalog
    bill = assemble([_run(tmp_path, _power_rows([150.0]))], plan_document(plan), _doctor(tmp_path, _burn()))
    _, (bound,) = power_bounds(bill)
    assert bound.analysis.bandwidth_gb_s == pytest.approx(936.0)
    assert bound.analysis.achieved_bandwidth_gb_s == pytest.approx(936.0 / 112 * 100)


def test_the_section_reaches_markdown_and_escaped_html(tmp_path: Path) -> None:
    run = _run(tmp_path, _power_rows([150.0]), model="<script>alert(1)</script>")
    bill = assemble([run], plan_document(PLAN), _doctor(tmp_path, _burn()))
    html, _ = render_report(bill, "html")
    assert 'id="power"' in html and "<script>" not in html and "&lt;script&gt;alert(1)" in html
    assert "150 W of the burn's 450 W" in html
    markdown, _ = render_report(bill, "md")
    assert "## Power and the bound" in markdown and "900 GB/s of the card's 1008 GB/s" in markdown
    assert md_text("<script>") in markdown


def test_report_cli_shows_the_bound_in_the_terminal(tmp_path: Path, capsys) -> None:
    run = _run(tmp_path, _power_rows([150.0]))
    plan, doctor = tmp_path / "plan.json", tmp_path / "doctor-in.json"
    plan.write_text(json.dumps(PLAN))
    doctor.write_text(json.dumps(_doctor(tmp_path, _burn())))
    code = main(
        [
            "report",
            run.id,
            "--db",
            str(tmp_path / "runs.db"),
            "--plan",
            str(plan),
            "--doctor",
            str(doctor),
            "--terminal",
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0 and err == ""
    assert "Power and the bound" in out and "bandwidth-bound" in out and "serving drew 150 W" in out


def test_report_json_carries_the_bound_with_its_numbers(tmp_path: Path, capsys) -> None:
    run = _run(tmp_path, _power_rows([150.0]))
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(PLAN))
    code = main(
        [
            "report",
            run.id,
            "--db",
            str(tmp_path / "runs.db"),
            "--plan",
            str(plan),
            "-o",
            str(tmp_path / "bill.html"),
            "--json",
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0 and err == ""
    (bound,) = json.loads(out)["bound"]
    assert (
        bound["verdict"] == "bandwidth-bound"
        and bound["burn_power_w"] is None
        and bound["power_samples"] == 1
    )
    assert bound["achieved_bandwidth_gb_s"] == pytest.approx(900.0) and bound[
        "serving_power_w"
    ] == pytest.approx(150.0)
    assert bound["power_level"] == "c=1" and bound["power_gpus"] == [0]
    (c1,) = bound["levels"]
    assert (c1["level"], c1["samples"], c1["gpus"]) == ("c=1", 1, 1)
    assert c1["joules_per_token"] == pytest.approx(150.0 / c1["output_tok_s"])


def test_power_alone_is_shown_but_undetermined_and_each_missing_flag_is_named_once(tmp_path: Path) -> None:
    section = _section(assemble([_run(tmp_path, _power_rows([150.0]))]))
    table = section.blocks[0]
    assert table.rows[0][1:5] == ("undetermined", "150", "c=1", "1")
    assert _texts(section) == []  # no verdict sentence without both halves
    notes = _texts(section, "note")
    assert (
        len(notes) == 2
        and sum("--plan FILE" in n for n in notes) == 1
        and sum("--doctor FILE" in n for n in notes) == 1
    )


def test_each_level_gets_its_power_and_energy_per_output_token(tmp_path: Path) -> None:
    bill = assemble([_run(tmp_path, _ladder_rows())], plan_document(PLAN), _doctor(tmp_path, _burn()))
    _, (bound,) = power_bounds(bill)
    tok_s = {lv.label: lv.aggregate_tok_s for lv in bill.engines[0].levels}
    got = [(p.level, p.samples, p.gpus, p.mean_power_w, p.joules_per_token) for p in bound.levels]
    assert got == [
        ("c=1", 3, 1, pytest.approx(150.0), pytest.approx(150.0 / tok_s["c=1"])),
        ("c=2", 2, 1, pytest.approx(310.0), pytest.approx(310.0 / tok_s["c=2"])),
    ]
    (table,) = [b for b in _section(bill).blocks if getattr(b, "key", None) == "power-levels"]
    assert [row[1:5] for row in table.rows] == [("c=1", "150", "1", "3"), ("c=2", "310", "1", "2")]
    assert table.rows[1][6] == f"{310.0 / tok_s['c=2']:,.2f}"


def test_energy_per_token_counts_every_serving_gpu(tmp_path: Path) -> None:
    label = {"target_index": 0, "level": "c=1", "repeat": 0}  # one model split over two busy GPUs
    rows = [
        {"t_ns": 0, "gpu": gpu, "power_w": watts, "sm_util_pct": 40, **label}
        for gpu, watts in ((0, 100.0), (1, 120.0))
    ]
    bill = assemble([_run(tmp_path, rows)])
    (c1,) = power_bounds(bill)[1][0].levels
    assert (c1.gpus, c1.mean_power_w, c1.total_power_w) == (2, pytest.approx(110.0), pytest.approx(220.0))
    assert c1.joules_per_token == pytest.approx(220.0 / bill.engines[0].single_stream.aggregate_tok_s)


def test_each_target_of_a_run_takes_its_own_single_stream_power(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    run_id = store_run(db, ladder=(1, 2), engines=("llamacpp", "vllm"))
    rows = [*_power_rows([150.0]), *_power_rows([400.0], "c=2"), *_power_rows([210.0], "c=1", target=1)]
    with Store.open(db) as store:
        store.add_samples(run_id, "gpu_power", rows)
        bill = assemble([store.load_run(run_id)], plan_document(PLAN))
    got = [(b.power_level, b.analysis.serving_power_w, b.samples) for b in power_bounds(bill)[1]]
    assert got == [("c=1", pytest.approx(150.0), 1), ("c=1", pytest.approx(210.0), 1)]


def test_without_single_stream_samples_the_power_spans_the_levels_and_says_so(tmp_path: Path) -> None:
    bill = assemble([_run(tmp_path, _power_rows([300.0, 320.0], "c=2"))], plan_document(PLAN))
    _, (bound,) = power_bounds(bill)
    assert (bound.power_level, bound.analysis.serving_power_w) == (None, pytest.approx(310.0))
    note = "llamacpp · tiny-test-model · short has no power samples at concurrency 1: serving power is the mean over all its levels."
    assert note in _texts(_section(bill), "note")


def test_an_old_run_without_levels_on_its_samples_still_renders_averaged_over_all_levels(
    tmp_path: Path,
) -> None:
    rows = _power_rows([140.0, 160.0, 150.0], None) + _power_rows([300.0, 320.0], None)
    bill = assemble([_run(tmp_path, rows)], plan_document(PLAN), _doctor(tmp_path, _burn()))
    _, (bound,) = power_bounds(bill)
    assert (bound.power_level, bound.samples, bound.levels) == (None, 5, ())
    assert bound.analysis.serving_power_w == pytest.approx(214.0)  # as before the labels: all five samples
    section = _section(bill)
    assert section.blocks[0].rows[0][2:5] == ("214", "all levels", "5")
    assert not any(getattr(b, "key", None) == "power-levels" for b in section.blocks)
    (sentence,) = _texts(section)
    assert "(mean of 5 samples on GPU 0 over all levels)" in sentence
    (note,) = _texts(section, "note")
    assert note == (
        f"Run {bill.run_ids[0]}'s power samples do not say their level (stored before the bench labelled "
        "them): serving power is the mean over all levels."
    )
    html, _ = render_report(bill, "html")
    markdown, _ = render_report(bill, "md")
    assert (
        'id="power"' in html and "214 W of the burn's 450 W" in html and "do not say their level" in markdown
    )

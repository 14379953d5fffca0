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
PLAN = {"model": "m", "gpu": "rtx4090", "plans": [{"engine": "llamacpp", "quant": "q8_0", "context": 4096, "fits": True,
        "decode_ceiling_tok_s": {"short": 112.0, "full_context": 90.0, "short_context": 1024, "bound": "memory"}}]}  # fmt: skip


def _power_rows(gpu0_watts: list[float]) -> list[dict]:
    """GPU 0 serves (SM busy); GPU 1 idles at 20 W with 0% SM and must not dilute the mean."""
    rows = []
    for i, watts in enumerate(gpu0_watts):
        common = {"t_ns": i * 200_000_000, "mem_util_pct": 80, "sm_clock_mhz": 2520, "mem_clock_mhz": 10501}
        rows.append({**common, "gpu": 0, "power_w": watts, "sm_util_pct": 35})
        rows.append({**common, "gpu": 1, "power_w": 20.0, "sm_util_pct": 0})
    return rows


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
    return BurnResult(status="ok", backend="torch", seconds=20.0, iterations=400, tflops=140.0, power_w=power_w,
                      max_power_w=power_w + 10, power_limit_w=450.0, samples=100)  # fmt: skip


def _section(bill) -> Section:
    return next(s for s in build_page(bill, with_plots=False) if s.key == "power")


def _texts(section: Section, kind: str = "text") -> list[str]:
    return [b.text for b in section.blocks if isinstance(b, Para) and b.kind == kind]


def test_a_third_of_the_burn_near_the_bandwidth_ceiling_is_bandwidth_bound(tmp_path: Path) -> None:
    bill = assemble([_run(tmp_path, _power_rows([140.0, 160.0, 150.0]))], PLAN, _doctor(tmp_path, _burn()))
    _, (bound,) = power_bounds(bill)
    a = bound.analysis
    assert a.verdict == "bandwidth-bound"
    assert (a.serving_power_w, a.burn_power_w) == pytest.approx((150.0, 450.0))
    assert (a.achieved_bandwidth_gb_s, a.bandwidth_gb_s) == pytest.approx((900.0, 1008.0))
    assert (bound.samples, bound.gpus) == (3, (0,))
    section = _section(bill)
    (sentence,) = _texts(section)
    assert sentence.startswith("llamacpp · tiny-test-model: bandwidth-bound (mean of 3 samples on GPU 0)")
    assert "decode moved 900 GB/s of the card's 1008 GB/s (89%)" in sentence
    assert "serving drew 150 W of the burn's 450 W (33%)" in sentence
    table = section.blocks[0]
    assert table.rows == (("llamacpp · tiny-test-model", "bandwidth-bound", "150", "3", "450", "33%", "900", "1,008",
                           "89%"),)  # fmt: skip
    assert _texts(section, "note") == []
    (verdict,) = [v for v in verdicts(bill) if v.scenario == "bound"]
    assert verdict.sentence == ("llamacpp · tiny-test-model was bandwidth-bound: decode moved 900 GB/s of the card's "
                                "1008 GB/s (89%); serving drew 150 W of the burn's 450 W (33%).")  # fmt: skip


def test_serving_at_the_burn_power_is_compute_or_power_bound(tmp_path: Path) -> None:
    bill = assemble([_run(tmp_path, _power_rows([420.0, 430.0]))], PLAN, _doctor(tmp_path, _burn(450.0)))
    _, (bound,) = power_bounds(bill)
    assert bound.analysis.verdict == "compute/power-bound"
    assert bound.analysis.power_fraction == pytest.approx(425 / 450)


def test_missing_inputs_each_name_the_flag_that_supplies_them(tmp_path: Path) -> None:
    section = _section(assemble([_run(tmp_path, None)]))
    notes = _texts(section, "note")
    assert any("--doctor FILE" in n and "servelab doctor --burn --json" in n for n in notes)
    assert any("--plan FILE" in n for n in notes)
    assert any("no GPU power samples" in n and "--no-power" in n for n in notes)
    assert _texts(section) == [] and not any(not isinstance(b, Para) for b in section.blocks)  # no empty table
    assert not any(v.scenario == "bound" for v in verdicts(assemble([_run(tmp_path, None)])))


def test_a_doctor_file_without_a_burn_or_with_a_skipped_one_says_so(tmp_path: Path) -> None:
    run = _run(tmp_path, _power_rows([150.0]))
    no_burn = _texts(_section(assemble([run], PLAN, _doctor(tmp_path, None))), "note")
    assert no_burn == ["The doctor file has no burn: run `servelab doctor --burn --json` on the GPU machine and "
                       "pass it with --doctor FILE."]  # fmt: skip
    skipped = BurnResult(status="skipped", reason="neither torch nor cupy is installed")
    section = _section(assemble([run], PLAN, _doctor(tmp_path, skipped)))
    assert any("skipped: neither torch nor cupy is installed" in n for n in _texts(section, "note"))
    (sentence,) = _texts(section)  # the bandwidth half still stands: 89% of the card is bandwidth-bound
    assert "bandwidth-bound" in sentence and "900 GB/s" in sentence and "power fraction unknown" in sentence


def test_a_custom_plan_gpu_takes_the_bandwidth_doctor_found(tmp_path: Path) -> None:
    plan = {**PLAN, "gpu": "custom"}  # the recorded RTX 3090: 936 GB/s in the catalog
    bill = assemble([_run(tmp_path, _power_rows([150.0]))], plan, _doctor(tmp_path, _burn()))
    _, (bound,) = power_bounds(bill)
    assert bound.analysis.bandwidth_gb_s == pytest.approx(936.0)
    assert bound.analysis.achieved_bandwidth_gb_s == pytest.approx(936.0 / 112 * 100)


def test_the_section_reaches_markdown_and_escaped_html(tmp_path: Path) -> None:
    run = _run(tmp_path, _power_rows([150.0]), model="<script>alert(1)</script>")
    bill = assemble([run], PLAN, _doctor(tmp_path, _burn()))
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
    code = main(["report", run.id, "--db", str(tmp_path / "runs.db"), "--plan", str(plan), "--doctor", str(doctor),
                 "--terminal"])  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0 and err == ""
    assert "Power and the bound" in out and "bandwidth-bound" in out and "serving drew 150 W" in out


def test_report_json_carries_the_bound_with_its_numbers(tmp_path: Path, capsys) -> None:
    run = _run(tmp_path, _power_rows([150.0]))
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(PLAN))
    code = main(["report", run.id, "--db", str(tmp_path / "runs.db"), "--plan", str(plan), "-o",
                 str(tmp_path / "bill.html"), "--json"])  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0 and err == ""
    (bound,) = json.loads(out)["bound"]
    assert bound["verdict"] == "bandwidth-bound" and bound["burn_power_w"] is None and bound["power_samples"] == 1
    assert bound["achieved_bandwidth_gb_s"] == pytest.approx(900.0) and bound["serving_power_w"] == pytest.approx(150.0)


def test_power_alone_is_shown_but_undetermined_and_each_missing_flag_is_named_once(tmp_path: Path) -> None:
    section = _section(assemble([_run(tmp_path, _power_rows([150.0]))]))
    table = section.blocks[0]
    assert table.rows[0][1:4] == ("undetermined", "150", "1")
    assert _texts(section) == []  # no verdict sentence without both halves
    notes = _texts(section, "note")
    assert len(notes) == 2 and sum("--plan FILE" in n for n in notes) == 1 and sum("--doctor FILE" in n for n in notes) == 1

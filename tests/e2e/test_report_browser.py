"""The bill of a REAL stored run, opened in headless Chromium.

A short ladder runs against a real llama-server (the project's self-made dense model, CPU build, -t 1)
through the bench library into a real SQLite store; `servelab report` renders it with the real
`servelab doctor --json` output and a plan; Chromium (over its DevTools protocol) checks every section
and plot, that nothing was fetched and that the console stayed clean, and saves screenshots (light and
dark) to the test's tmp dir and to out/ for a person to look at.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from servelab.bench.config import BenchConfig
from servelab.bench.runner import run
from servelab.bench.schedule import StopRule
from servelab.bench.workloads import WorkloadSpec
from servelab.cli.app import main
from servelab.report.data import series_labels
from servelab.store import Store
from tests.e2e.chromium_cdp import Chromium, inspect_page
from tests.runs_factory import store_run

pytestmark = [pytest.mark.engine, pytest.mark.browser]

REPO = Path(__file__).resolve().parents[2]
SECTIONS = [
    "summary",
    "runs",
    "ladder",
    "throughput",
    "latency",
    "roofline",
    "memory",
    "timeline",
    "doctor",
    "power",
    "spec",
    "verdict",
]
PLOTS = [
    "aggregate-throughput",
    "per-stream",
    "pareto",
    "latency-percentiles",
    "itl-distribution",
    "roofline",
    "memory",
    "timeline",
]
CHECKS_JS = """(() => {
  const plots = [...document.querySelectorAll('figure[data-plot]')].map(f => {
    const svg = f.querySelector('svg');
    const box = svg ? svg.getBoundingClientRect() : {width: 0, height: 0};
    return {key: f.dataset.plot, width: box.width, height: box.height,
            text: svg ? svg.textContent : '', caption: f.querySelector('figcaption')?.textContent};
  });
  const ids = [...document.querySelectorAll('[id]')].map(e => e.id);
  return {
    sections: [...document.querySelectorAll('main > section')].map(s => s.id),
    headings: [...document.querySelectorAll('main > section > h2')].map(h => h.textContent),
    plots,
    duplicateIds: ids.filter((id, i) => ids.indexOf(id) !== i),
    scripts: document.querySelectorAll('script').length,
    summaryRows: [...document.querySelectorAll('#table-summary tbody tr')].map(r => r.cells[0].textContent),
    verdicts: [...document.querySelectorAll('#verdict li')].map(li => li.textContent),
    bodyText: document.body.innerText,
  };
})()"""


@pytest.fixture
def real_run(llama_server, model_files: dict[str, Path], tmp_path: Path) -> tuple[Path, str, Path]:
    """A stored run: concurrency 1 and 2, 6 measured requests each, against a real llama-server.

    256-token outputs: the tiny model decodes thousands of tokens/s, so on a loaded 2-core machine a short
    stream can arrive in one socket read (every gap 0, no decode speed); 256 tokens span many reads."""
    server = llama_server(model_files["dense"], "-c", "2048", "-np", "2", "-lv", "4")  # -lv 4: buffer sizes
    config = BenchConfig(
        targets=(server.url,),
        concurrency=(1, 2),
        stop=StopRule(requests=6),
        workload=WorkloadSpec("short", input_tokens=32, output_tokens=256),
        name="browser-e2e",
    )
    db = tmp_path / "runs.db"
    with Store.open(db) as store:
        result = run(config, store)
    return db, result.run_id, server.log_path


def _open_in_chromium(tmp_path: Path, html: Path, shots: dict[str, tuple[Path, bool]]) -> dict:
    chromium = Chromium(tmp_path / "chromium-profile")
    try:
        return asyncio.run(inspect_page(chromium, html.as_uri(), CHECKS_JS, shots))
    finally:
        chromium.close()


def test_the_bill_of_a_real_run_renders_every_section_and_plot(
    real_run, model_files, tmp_path: Path, capsys
) -> None:
    db, run_id, server_log = real_run
    doctor = tmp_path / "doctor.json"
    assert main(["doctor", "--json"]) == 0
    doctor.write_text(capsys.readouterr().out)
    spec = tmp_path / "spec.json"
    assert main(["spec", "--accept-rate", "0.46", "--draft-tokens", "4", "--json"]) == 0
    spec.write_text(capsys.readouterr().out)
    plan = tmp_path / "plan.json"  # this CPU machine stated as 8 GiB at 20 GB/s: the ceilings are an input
    assert (
        main(
            [
                "plan",
                str(model_files["dense"]),
                "--engine",
                "llamacpp",
                "--context",
                "2048",
                "--parallel",
                "2",
                "--vram",
                "8",
                "--bandwidth",
                "20",
                "--json",
            ]
        )
        == 0
    )
    plan.write_text(capsys.readouterr().out)
    bill = tmp_path / "bill.html"
    assert (
        main(
            [
                "report",
                run_id,
                "--db",
                str(db),
                "--plan",
                str(plan),
                "--doctor",
                str(doctor),
                "--spec",
                str(spec),
                "--server-log",
                str(server_log),
                "-o",
                str(bill),
            ]
        )
        == 0
    )

    shots = {
        "light": (tmp_path / "report-screenshot.png", False),
        "dark": (tmp_path / "report-screenshot-dark.png", True),
    }
    page = _open_in_chromium(tmp_path, bill, shots)
    out = REPO / "out"
    out.mkdir(exist_ok=True)
    for path, _ in shots.values():
        assert path.stat().st_size > 10_000
        shutil.copy(path, out / path.name)

    assert (
        page["exceptions"] == [] and [c for c in page["console"] if c["level"] in ("error", "warning")] == []
    )
    assert page["requests"] == [bill.as_uri()]  # self-contained: nothing else fetched
    checks = page["checks"]
    assert checks["sections"] == SECTIONS and checks["duplicateIds"] == [] and checks["scripts"] == 0
    assert sorted(p["key"] for p in checks["plots"]) == sorted(PLOTS)
    for plot in checks["plots"]:
        assert plot["width"] > 300 and plot["height"] > 100, plot["key"]
    throughput = next(p for p in checks["plots"] if p["key"] == "aggregate-throughput")
    assert "concurrency (requests in flight)" in throughput["text"] and "(tokens/s)" in throughput["text"]
    assert checks["summaryRows"] == [f"llamacpp · {model_files['dense'].stem} · short"]  # no temporary path
    with Store.open(db) as store:
        stored = store.load_run(run_id)
    assert f"Runs: {run_id}." in checks["bodyText"]
    assert any(v.startswith("Serving many: llamacpp") for v in checks["verdicts"])
    assert "Doctor found" in checks["bodyText"] and len(stored.requests) >= 8
    assert any(v.startswith("Speculative decoding: Keep, acceptance alpha 0.71") for v in checks["verdicts"])
    assert (
        "No doctor findings" not in checks["bodyText"]
        and "No speculative-decoding verdict" not in checks["bodyText"]
    )
    assert "no ceiling" not in checks["bodyText"] and "No plan given" not in checks["bodyText"]
    assert any(
        v.startswith("Memory-starved: llamacpp") and "MiB used (plan:" in v for v in checks["verdicts"]
    )
    assert "ceiling (plan" in throughput["text"]
    assert any("of the plan's" in v and "ceiling at that concurrency" in v for v in checks["verdicts"])
    # no GPU here: the power section names what would supply each missing input instead of guessing
    assert "Power and the bound" in checks["headings"]
    assert f"Run {run_id} has no GPU power samples" in checks["bodyText"]
    assert "The doctor file has no burn: run servelab doctor --burn --json" in checks["bodyText"]
    assert (
        "<code>servelab doctor --burn --json</code>" in bill.read_text()
    )  # commands in sentences shown as code


def test_a_model_name_carrying_a_script_stays_text_in_the_browser(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    hostile = "<script>alert(1)</script><img src=x onerror=alert(2)>"
    run_id = store_run(db, model=hostile, failure="HTTP 500: <script>alert(3)</script>")
    bill = tmp_path / "hostile.html"
    assert main(["report", run_id, "--db", str(db), "-o", str(bill)]) == 0
    page = _open_in_chromium(tmp_path, bill, {})
    checks = page["checks"]
    assert checks["scripts"] == 0 and page["exceptions"] == []
    assert checks["summaryRows"] == series_labels([("llamacpp", hostile, "short", run_id)])  # text, clipped
    assert f"llamacpp · {hostile}" in checks["bodyText"]  # the runs table names the model exactly, as text
    assert "HTTP 500: <script>alert(3)</script>" in checks["bodyText"]  # an error text the server returned
    assert page["requests"] == [bill.as_uri()]  # the <img src=x> was never parsed as an element

"""The bill's layout, read back from the DOM of headless Chromium.

Two real `servelab sim` servers (a fast and a slow "engine") are benched through the bench library into a
real SQLite store with a TPOT SLO; `servelab report` renders them against a plan whose ceilings are three
orders of magnitude above what the sims deliver (the CPU-under-a-GPU-ceiling case of issue 15). Chromium
checks that no legend overlaps a data point or an axis label, that the measured curves fill their axes
(the far ceiling is a band at the edge), that every point has a tooltip, that series labels are unique and
short, that the theme toggle swaps the colours, and that nothing was fetched or logged. Screenshots (light
and dark) go to $SERVELAB_ARTIFACTS (else the test's tmp dir) and are printed.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from servelab.bench.config import BenchConfig
from servelab.bench.metrics import Slo
from servelab.bench.runner import run
from servelab.bench.schedule import StopRule
from servelab.bench.workloads import WorkloadSpec
from servelab.cli.app import main
from servelab.store import Store
from tests.bench_sim import sim_process
from tests.e2e.chromium_cdp import Chromium, inspect_page

pytestmark = pytest.mark.browser

FAR_PLAN = {
    "model": "sim",
    "gpu": "h200",
    "plans": [
        {
            "engine": "openai",
            "quant": "bf16",
            "context": 4096,
            "tensor_parallel": 1,
            "memory_bytes": {"weights": 2 << 30, "kv_cache": 1 << 30, "total": 3 << 30},
            "decode_ceiling_tok_s": {"short": 90_000.0, "full_context": 60_000.0},
            "decode_batch_tok_s": [{"batch": b, "aggregate_tok_s": 90_000.0 * b} for b in (1, 2, 4)],
        }
    ],
}

LAYOUT_JS = """(() => {
  const box = e => e.getBoundingClientRect();
  const hit = (a, b) => a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
  const figures = [...document.querySelectorAll('figure[data-plot]')].map(f => {
    const legends = [...f.querySelectorAll('[data-role=legend]')];
    const points = [...f.querySelectorAll('[data-role=point]')];
    const labels = [...f.querySelectorAll('[data-role=axis-label]')];
    const overlaps = [];
    for (const legend of legends) {
      const l = box(legend);
      points.forEach((p, i) => { if (hit(l, box(p))) overlaps.push('point ' + i); });
      labels.forEach(t => { if (hit(l, box(t))) overlaps.push('label ' + t.textContent.trim()); });
    }
    const axes = [...f.querySelectorAll('[data-role=axes]')].map(box);
    const spans = axes.map(a => {
      const inside = points.map(box).filter(p => hit(a, p));
      if (inside.length < 2) return null;
      const top = Math.min(...inside.map(p => p.top)), bottom = Math.max(...inside.map(p => p.bottom));
      return (bottom - top) / a.height;
    });
    return {key: f.dataset.plot, legends: legends.length, points: points.length, overlaps, spans,
            untitled: points.filter(p => !(p.querySelector('title')?.textContent || '').trim()).length,
            legendTexts: legends.map(l => [...l.querySelectorAll('text')].map(t => t.textContent.trim())),
            text: f.querySelector('svg').textContent};
  });
  const bg = () => getComputedStyle(document.body).backgroundColor;
  const before = bg();
  document.getElementById('theme-swap').click();
  const swapped = bg();
  document.getElementById('theme-swap').click();
  return {figures, before, swapped, after: bg(), scripts: document.querySelectorAll('script').length,
          series: [...document.querySelectorAll('#table-summary tbody tr')].map(r => r.cells[0].textContent),
          glance: document.querySelector('#summary').innerText};
})()"""


@pytest.fixture
def two_engine_run(tmp_path: Path) -> tuple[Path, str]:
    """c=1,2,4 against a fast and a slow sim, 6 measured requests per level, TPOT SLO 8 ms. The TTFTs are 55 ms
    apart: the verdicts compare p99s (of 6 requests: the slowest), which one late wake-up on a loaded host moves
    by several ms (5 against 10 ms once named the slow sim faster under load)."""
    with (
        sim_process("--ttft-ms", "5", "--itl-ms", "4", "--model", "fast-model") as fast,
        sim_process("--ttft-ms", "60", "--itl-ms", "9", "--model", "slow-model") as slow,
    ):
        config = BenchConfig(
            targets=(fast, slow),
            concurrency=(1, 2, 4),
            stop=StopRule(requests=6),
            warmup=0,
            workload=WorkloadSpec("short", input_tokens=16, output_tokens=24),
            slo=Slo(tpot_ms=8.0),
        )
        db = tmp_path / "runs.db"
        with Store.open(db) as store:
            return db, run(config, store).run_id


def _artifacts(tmp_path: Path) -> Path:
    where = Path(os.environ.get("SERVELAB_ARTIFACTS") or tmp_path / "artifacts")
    where.mkdir(parents=True, exist_ok=True)
    return where


def test_the_bill_of_two_engines_reads_at_a_glance_in_chromium(two_engine_run, tmp_path: Path) -> None:
    db, run_id = two_engine_run
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(FAR_PLAN))
    bill = tmp_path / "bill.html"
    assert main(["report", run_id, "--db", str(db), "--plan", str(plan), "-o", str(bill)]) == 0
    out = _artifacts(tmp_path)
    shots = {"light": (out / "bill-light.png", False), "dark": (out / "bill-dark.png", True)}
    chromium = Chromium(tmp_path / "chromium-profile")
    try:
        page = asyncio.run(inspect_page(chromium, bill.as_uri(), LAYOUT_JS, shots))
    finally:
        chromium.close()
    for path, _ in shots.values():
        assert path.stat().st_size > 10_000
        print(f"screenshot: {path}")

    assert (
        page["exceptions"] == [] and [c for c in page["console"] if c["level"] in ("error", "warning")] == []
    )
    assert page["requests"] == [bill.as_uri()]  # nothing fetched: no font, script or image from anywhere
    checks = page["checks"]
    assert checks["scripts"] == 0  # the theme toggle is CSS
    assert checks["before"] != checks["swapped"] and checks["after"] == checks["before"]
    series = checks["series"]
    assert series == ["openai · fast-model · short", "openai · slow-model · short"]
    assert "Faster for single user: openai · fast-model · short" in checks["glance"]
    assert "Faster for mixed-load tail: openai · fast-model · short" in checks["glance"]
    figures = {f["key"]: f for f in checks["figures"]}
    assert {
        "aggregate-throughput",
        "per-stream",
        "pareto",
        "latency-percentiles",
        "roofline",
        "timeline",
    } <= set(figures)
    for key, figure in figures.items():
        assert figure["legends"] >= 1 and figure["overlaps"] == [], key
        assert figure["untitled"] == 0, key  # every point has its <title> tooltip
        for texts in figure["legendTexts"]:
            assert len(set(texts)) == len(texts) and all(len(t) < 60 for t in texts), (key, texts)
    for key in ("aggregate-throughput", "per-stream", "pareto"):
        assert figures[key]["points"] >= 6, key
        assert all(span is None or span > 0.3 for span in figures[key]["spans"]), (key, figures[key]["spans"])
    assert "off this scale" in figures["aggregate-throughput"]["text"]  # the far ceiling, at the edge
    assert "SLO TPOT ≤ 8 ms" in figures["pareto"]["text"]

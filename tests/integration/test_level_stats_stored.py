"""A level's statistics are computed once by the bench, stored with the level and read back by report/export."""

from __future__ import annotations

import dataclasses

import pytest

from servelab.bench.config import BenchConfig
from servelab.bench.runner import run
from servelab.bench.schedule import StopRule
from servelab.bench.summary import summarize_records
from servelab.bench.workloads import WorkloadSpec
from servelab.report.export import run_json
from servelab.report.levels import all_level_figures
from servelab.results.level_key import Level
from servelab.store import Store
from tests.bench_sim import sim_process


def test_report_and_export_read_the_stats_the_bench_stored(tmp_path) -> None:
    config = BenchConfig(
        targets=("",),
        concurrency=(1, 2),
        repeat=2,
        warmup=0,
        stop=StopRule(requests=4),
        workload=WorkloadSpec("short", 8, 4),
    )
    with sim_process("--ttft-ms", "5", "--itl-ms", "5") as url, Store.open(tmp_path / "r.db") as store:
        result = run(dataclasses.replace(config, targets=(url,)), store)
        stored = store.load_run(result.run_id)
    printed = [lv.stats for lv in result.targets[0].levels]
    assert list(stored.level_stats.values()) == printed  # what --json printed is what was stored
    assert [k for _, k in stored.level_stats] == [Level.closed(1), Level.closed(2)]
    figures = all_level_figures(stored)
    assert [lv.stats for lv in figures] == printed  # read back, not recomputed
    c2 = run_json(stored)["targets"][0]["levels"][1]
    assert c2["completed"] == printed[1].completed == 8 and c2["median_ttft_ms"] == printed[1].ttft_ms.p50
    assert c2["steady_output_throughput"] == printed[1].output_tok_s  # the mean over the two repeats
    # an old run (no level_stats rows) gets the same figures from the same bench code over its records
    legacy = summarize_records([r for r in stored.requests if r.level == "c=2"], Level.closed(2))
    assert legacy.ttft_ms == printed[1].ttft_ms and legacy.output_tok_s == pytest.approx(
        printed[1].output_tok_s
    )
    assert legacy.duration_s == pytest.approx(printed[1].duration_s) and legacy.repeats == 2

"""--find-max-rate against `servelab sim --slots`: the bracket holds the rate the sim's timing predicts.

The sim with S slots holds each answer ttft + (out − 1)·itl (SimConfig.capacity_req_s): it serves
μ = S / that requests/s. With evenly spaced arrivals (burstiness inf) at λ ≤ μ no request waits for a
slot; above μ request k waits about k·(1/μ − 1/λ). A request meets ttft_ms ≤ L when its wait is within the
slack L − ttft, so a level of M requests reaches 90% attainment while 0.9·M − 1 waits fit the slack:
λ ≤ λ_hi = 1 / (1/μ − slack / (⌈0.9·M⌉ − 1)). The highest passing rate is in [μ, λ_hi], up to noise.
"""

from __future__ import annotations

import json
import math

import pytest

from servelab.bench.config import BenchConfig
from servelab.bench.metrics import Slo
from servelab.bench.rate_search import SearchSpec
from servelab.bench.runner import run
from servelab.bench.schedule import StopRule
from servelab.bench.workloads import WorkloadSpec
from servelab.cli.app import main
from servelab.sim.config import SimConfig
from servelab.store import Store
from tests.bench_sim import sim_process

pytestmark = pytest.mark.timing  # wall-clock figures against the sim: run with no other test beside it

SIM = SimConfig(ttft_ms=20.0, itl_ms=10.0, slots=2)
OUT, MEASURED, SLO_TTFT_MS = 10, 30, 60.0


def test_the_bracket_holds_the_capacity_the_sim_timing_predicts(tmp_path):
    mu = SIM.capacity_req_s(OUT)
    assert mu is not None
    slack_s = (SLO_TTFT_MS - SIM.ttft_ms) / 1000
    lam_hi = 1 / (1 / mu - slack_s / (math.ceil(0.9 * MEASURED) - 1))
    with (
        sim_process("--ttft-ms", "20", "--itl-ms", "10", "--slots", "2") as url,
        Store.open(tmp_path / "r.db") as store,
    ):
        config = BenchConfig(
            targets=(url,),
            rate=8.0,
            burstiness=math.inf,
            stop=StopRule(requests=MEASURED),
            workload=WorkloadSpec("short", 8, OUT),
            slo=Slo(ttft_ms=SLO_TTFT_MS),
            search=SearchSpec(cap_rps=200.0),
        )
        result = run(config, store)
        stored = store.load_run(result.run_id)
    answer = result.targets[0].max_rate
    assert answer is not None and answer.outcome == "found"
    assert answer.passing_rps is not None and answer.failing_rps is not None
    assert mu * 0.93 <= answer.failing_rps and answer.passing_rps <= lam_hi * 1.05  # noise: a few %
    assert answer.failing_rps <= answer.passing_rps * 1.05 + 1e-9
    # every probe is a stored level, and the answer is stored with the run
    probes = [p.rate_rps for p in answer.probes]
    assert sorted(lv.rate_rps for _, lv in stored.level_stats) == sorted(probes)
    assert stored.summary["targets"][0]["max_rate"]["highest_passing"] == answer.passing_rps


def test_cli_prints_the_answer_and_one_line_when_there_is_none(tmp_path, capsys):
    common = [
        "--requests",
        "6",
        "--burstiness",
        "inf",
        "--output-tokens",
        "3",
        "--db",
        str(tmp_path / "r.db"),
    ]
    with sim_process("--ttft-ms", "5", "--itl-ms", "2") as url:
        assert main(["bench", url, "--find-max-rate", "--slo", "ttft_ms=1", "--rate", "4", *common]) == 1
        err = [line for line in capsys.readouterr().err.splitlines() if not line.startswith("[")]  # progress
        assert len(err) == 1 and err[0].startswith(
            "servelab: error: no rate tried had 90% of requests meeting"
        )
        assert "the lowest, 4 req/s" in err[0] and "is stored" in err[0]
        code = main(
            [
                "bench",
                url,
                "--find-max-rate",
                "--slo",
                "e2e_ms=5000",
                "--rate",
                "8",
                "--max-rate",
                "16",
                "--json",
                *common,
            ]
        )
        out, err = capsys.readouterr()
        lines = [line for line in err.splitlines() if not line.startswith("[")]
        assert code == 1 and len(lines) == 1 and "every rate tried up to the cap" in lines[0]
        doc = json.loads(out)
        assert doc["targets"][0]["max_rate"]["outcome"] == "all_passed"
        assert [lv["level"] for lv in doc["targets"][0]["levels"]] == ["r=8", "r=16"]


def test_find_max_rate_settings_are_checked_before_any_load(capsys):
    for args, words in (
        (["--find-max-rate"], "--find-max-rate needs --slo"),
        (["--probes", "3"], "--probes only go with --find-max-rate"),
        (
            ["--find-max-rate", "--slo", "ttft_ms=5", "--rate", "9", "--max-rate", "3"],
            "--max-rate 3 is below --rate 9",
        ),
    ):
        assert main(["bench", "http://127.0.0.1:9", *args]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and words in err, err

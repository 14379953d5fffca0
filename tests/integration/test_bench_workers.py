"""`servelab bench --workers N` against `servelab sim` on loopback: real worker processes, real SIGKILL/SIGINT.

One machine: perf_counter_ns is CLOCK_MONOTONIC in every process, so the sim's /sim/requests log, the
workers' stamps and the test share one clock.
"""

from __future__ import annotations

import copy
import itertools
import json
import os
import signal
import socket
import time
from pathlib import Path

import psutil
import pytest

from servelab.bench.clock import ClockEstimate
from servelab.bench.config import BenchConfig
from servelab.bench.fleet import Merge, WorkerReport, shift
from servelab.bench.level import LevelState
from servelab.bench.metrics import Slo, percentile
from servelab.bench.runner import run
from servelab.bench.schedule import StopRule
from servelab.bench.summary import summarize_level
from servelab.bench.workloads import WorkloadSpec
from servelab.results.level_key import Level
from servelab.store import Store
from tests.bench_sim import sim_process
from tests.fleet_sim import bench, env, finished_before, sim_log, wait_stored, worker_pids

pytestmark = pytest.mark.timing  # wall-clock figures against the sim: run with no other test beside it


def _config(url: str, **kw) -> BenchConfig:
    return BenchConfig(targets=(url,), workload=WorkloadSpec("short", 16, 16), **kw)


def test_records_split_over_three_workers_on_their_own_clocks_merge_into_identical_figures(tmp_path: Path):
    db = tmp_path / "runs.db"
    slo = Slo(ttft_ms=12.0, tpot_ms=6.0)
    with sim_process("--itl-ms", "5", "--ttft-ms", "10") as url, Store.open(db) as store:
        run_id = run(
            _config(url, concurrency=(3,), stop=StopRule(requests=30), warmup=0, slo=slo), store
        ).run_id
        records = list(store.load_run(run_id).requests)
    level = Level.closed(3)
    whole = summarize_level(records, level, slo).to_json()
    offsets = [0, -7_000_000_123, 3_141_592_653]  # worker k's clock = coordinator's - offsets[k]
    reports = [
        WorkerReport(index=k, info={}, clock_before=ClockEstimate(off, 0)) for k, off in enumerate(offsets)
    ]
    on_worker_clock = [[shift(copy.deepcopy(r), -offsets[k]) for r in records[k::3]] for k in range(3)]
    merged: list = []
    state = LevelState(warmup=0, stop=StopRule(requests=30))
    merge = Merge(state, merged.append)
    batches = [(k, b) for k in range(3) for b in _batches(on_worker_clock[k], sizes=(1, 3, 2))]
    for k, batch in sorted(batches, key=lambda kb: kb[1][0].end_ns + offsets[kb[0]]):  # as they would arrive
        merge.accept(reports[k], batch)
    assert len(merged) == len(records) == state.done == 30
    assert [r.records for r in reports] == [10, 10, 10]
    assert summarize_level(merged, level, slo).to_json() == whole  # every percentile, window, goodput
    assert summarize_level(merged, level, slo).ttft_ms.p99 is not None


def _batches(records: list, sizes: tuple[int, ...]) -> list[list]:
    out, at, k = [], 0, 0
    while at < len(records):
        size = sizes[k % len(sizes)]
        out.append(records[at : at + size])
        at, k = at + size, k + 1
    return out


def _truth(url: str, records) -> dict:
    """From the sim's own log: the largest stamp error (client stamp - sim write, any content chunk) and
    the TTFT / ITL the sim really produced (its write - the client's send; its gaps between writes)."""
    log = sim_log(url)
    ok = [r for r in records if r.phase == "measure" and r.status == "ok"]
    error = max(
        (stamp - wrote) / 1e6
        for r in records
        for stamp, wrote in zip(r.chunk_ns, log[r.request_id]["chunks_ns"], strict=True)
    )
    ttft = [(log[r.request_id]["chunks_ns"][0] - r.sent_ns) / 1e6 for r in ok]
    itl = [(b - a) / 1e6 for r in ok for a, b in itertools.pairwise(log[r.request_id]["chunks_ns"])]
    return {"error_ms": error, "ttft_ms": ttft, "itl_ms": itl}


def test_two_workers_send_the_same_open_loop_schedule_and_store_every_request_with_the_same_figures(
    tmp_path: Path,
):
    config = {"rate": 40.0, "stop": StopRule(requests=40), "warmup": 2, "seed": 7}
    runs = {}
    with sim_process("--itl-ms", "5", "--ttft-ms", "10") as url:
        for workers in (None, 2):
            with Store.open(tmp_path / f"{workers}.db") as store:
                result = run(_config(url, workers=workers, **config), store)
                stored = store.load_run(result.run_id)
            runs[workers] = (
                result.to_json()["targets"][0]["levels"][0],
                stored,
                _truth(url, stored.requests),
            )
    (one, one_run, one_truth), (two, two_run, two_truth) = runs[None], runs[2]
    assert len(two_run.requests) == len(one_run.requests) == 42  # every request, warm-ups included
    assert {r.request_id for r in two_run.requests} == {r.request_id for r in one_run.requests}
    assert _schedule(two_run.requests) == _schedule(one_run.requests)  # the same seeded absolute schedule
    assert two["requests"] == two["completed"] == 40
    assert [w["records"] for w in two["client"]["workers"]] == [21, 21]
    assert two["client"]["clock_bound_ms"] == 0 and two["client"]["clock_source"].startswith("shared")
    (stats,) = two_run.level_stats.values()
    assert stats == summarize_level(two_run.requests, Level.open(40.0))  # figures from the merged records
    # each stored figure is the sim's truth moved by at most its run's stamp error, so the two runs' figures
    # differ by no more than the sim's own difference between the runs plus both stamp errors
    slack = one_truth["error_ms"] + two_truth["error_ms"]
    for metric in ("ttft_ms", "itl_ms"):
        for p, q in (("p50", 50.0), ("p90", 90.0)):
            sim_gap = abs(percentile(one_truth[metric], q) - percentile(two_truth[metric], q))
            gap = abs(one[metric][p] - two[metric][p])
            assert gap <= sim_gap + slack, (metric, p, one[metric][p], two[metric][p], sim_gap, slack)


def _schedule(records) -> list[int]:
    measured = [r for r in records if r.phase == "measure"]
    t0 = min(r.intended_ns for r in measured)
    return sorted(r.intended_ns - t0 for r in measured)


def test_a_worker_killed_mid_level_loses_only_its_requests_in_flight_and_marks_the_level(tmp_path: Path):
    db = tmp_path / "runs.db"
    with sim_process("--itl-ms", "3", "--ttft-ms", "5") as url:
        proc = bench(
            url, db, "--workers", "2", "--concurrency", "4", "--requests", "240", "--output-tokens", "16"
        )
        wait_stored(db, proc, 20)
        victim = worker_pids(proc.pid)[1]
        kill_ns = time.perf_counter_ns()
        os.kill(victim, signal.SIGKILL)
        out, err = proc.communicate(timeout=120)
        must_have = finished_before(url, kill_ns - 50_000_000)
    assert proc.returncode == 0, err
    (level,) = json.loads(out)["targets"][0]["levels"]
    assert level["partial"] is True and level["valid"] is False
    assert "was lost mid-level (killed by SIGKILL)" in level["invalid_reason"], level["invalid_reason"]
    lost = [w for w in level["client"]["workers"] if w["died"]]
    assert len(lost) == 1 and lost[0]["pid"] == victim
    with Store.open(db, must_exist=True) as store:
        (info,) = store.list_runs()
        requests = store.load_run(info.id).requests
    stored = {r.request_id for r in requests}
    assert must_have <= stored, sorted(must_have - stored)  # every request finished before the kill is kept
    assert len(requests) == len(stored)  # none twice
    assert any(r.sent_ns > kill_ns for r in requests)  # the other worker went on
    survivor = next(w for w in level["client"]["workers"] if not w["died"])
    assert survivor["records"] == 2 + 120  # its warm-ups and its whole share
    assert level["requests"] == len([r for r in requests if r.phase == "measure"]) < 240


def test_ctrl_c_stops_every_worker_and_keeps_every_finished_record(tmp_path: Path):
    db = tmp_path / "runs.db"
    with sim_process("--itl-ms", "5", "--ttft-ms", "5") as url:
        proc = bench(
            url,
            db,
            "--workers",
            "2",
            "--concurrency",
            "4",
            "--requests",
            "400",
            "--output-tokens",
            "16",
            start_new_session=True,
        )  # (its own process group, as a terminal's job)
        wait_stored(db, proc, 20)
        workers = worker_pids(proc.pid)
        sigint_ns = time.perf_counter_ns()
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: the whole group, workers included
        out, err = proc.communicate(timeout=120)
        must_have = finished_before(url, sigint_ns - 50_000_000)
        sim_seen = set(sim_log(url))
    assert proc.returncode == 130, err
    assert len(workers) == 2 and not any(
        psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE for pid in workers
    )
    printed = json.loads(out)
    assert printed["partial"] is True
    with Store.open(db, must_exist=True) as store:
        stored = store.load_run(printed["run_id"])
    ids = {r.request_id for r in stored.requests}
    assert must_have <= ids, sorted(must_have - ids)
    assert sim_seen <= ids  # every request the sim saw is a record: finished, or cancelled in flight
    assert all(r.error_kind == "cancelled" for r in stored.requests if r.request_id not in sim_seen)
    cancelled = [r for r in stored.requests if r.error_kind == "cancelled"]
    assert len(cancelled) <= 4 and all(r.status == "ok" for r in stored.requests if r not in cancelled)
    assert stored.info.partial


def test_bad_worker_options_are_one_line_and_exit_2_before_any_run(tmp_path: Path):
    db = tmp_path / "runs.db"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]  # nothing listens once this socket is closed
    with sim_process() as url:
        for args, words in (
            (["--workers", "0"], "--workers must be"),
            (["--ray", f"127.0.0.1:{closed}"], "no Ray head answers"),
            (["--ray", "nonsense"], "bad --ray"),
        ):
            proc = bench(url, db, *args)
            out, err = proc.communicate(timeout=60)
            assert proc.returncode == 2 and out == "", (args, err)
            (line,) = err.strip().splitlines()
            assert line.startswith("servelab: error:") and words in line, line
    if db.exists():
        with Store.open(db, must_exist=True) as store:
            assert store.list_runs() == []


def test_a_stopped_worker_is_named_and_killed_within_its_silence_limit_and_the_run_ends(tmp_path: Path):
    """SIGSTOP leaves a worker's socket open and silent: it used to hold the level (and the run) forever."""
    db = tmp_path / "runs.db"
    with sim_process("--itl-ms", "3", "--ttft-ms", "5") as url:
        proc = bench(
            url,
            db,
            "--workers",
            "2",
            "--concurrency",
            "4",
            "--requests",
            "240",
            "--output-tokens",
            "16",
            environ=env(SERVELAB_WORKER_SILENT_S="3"),
        )
        wait_stored(db, proc, 20)
        victim = worker_pids(proc.pid)[1]
        stop_ns = time.perf_counter_ns()
        os.kill(victim, signal.SIGSTOP)
        try:
            out, err = proc.communicate(timeout=120)
        finally:
            if psutil.pid_exists(victim):
                os.kill(victim, signal.SIGKILL)
        must_have = finished_before(url, stop_ns - 50_000_000)
    assert proc.returncode == 0, err
    (level,) = json.loads(out)["targets"][0]["levels"]
    assert level["partial"] is True and level["valid"] is False
    assert f"pid {victim}) was lost mid-level (stopped answering: no word for" in level["invalid_reason"]
    assert f"pid {victim}" in err  # named on the terminal too
    (lost,) = [w for w in level["client"]["workers"] if w["died"]]
    assert lost["pid"] == victim and not psutil.pid_exists(victim)
    with Store.open(db, must_exist=True) as store:
        (info,) = store.list_runs()
        requests = store.load_run(info.id).requests
    assert info.status == "finished"
    assert must_have <= {r.request_id for r in requests}  # what it finished before it stopped is kept

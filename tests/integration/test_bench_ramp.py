"""`--ramp` against `servelab sim`: the ramp's requests are stored (phase "ramp") and in no figure."""

from __future__ import annotations

import asyncio
import itertools
import math
import time

import pytest

from servelab.bench.client import ClientRequest, StreamClient
from servelab.bench.config import BenchConfig
from servelab.bench.level import LevelState, run_closed
from servelab.bench.ramp import ramped_arrival_offsets_ns
from servelab.bench.runner import run
from servelab.bench.schedule import StopRule
from servelab.bench.summary import summarize_level
from servelab.bench.workloads import WorkloadSpec
from servelab.cli.app import main
from servelab.results.level_key import Level
from servelab.store import Store
from tests.bench_sim import sim_process, sim_requests_seen

pytestmark = pytest.mark.timing  # wall-clock figures against the sim: run with no other test beside it

FAST = ("--ttft-ms", "5", "--itl-ms", "5")


def _run(url: str, tmp_path, **kw):
    config = BenchConfig(targets=(url,), workload=WorkloadSpec("short", 8, 4), **kw)
    with Store.open(tmp_path / "r.db") as store:
        result = run(config, store)
        return result.to_json(), store.load_run(result.run_id)


def test_closed_loop_ramp_records_are_stored_flagged_and_left_out(tmp_path):
    with sim_process(*FAST) as url:
        result, stored = _run(url, tmp_path, concurrency=(4,), stop=StopRule(requests=8), ramp_s=0.4)
        seen = sim_requests_seen(url)
    (level,) = result["targets"][0]["levels"]
    ramp = [r for r in stored.requests if r.phase == "ramp"]
    measured = [r for r in stored.requests if r.phase == "measure"]
    assert len(measured) == 8 and len(ramp) > 4 and seen == len(stored.requests)  # no warm-up with a ramp
    assert level["requests"] == 8 and level["ttft_ms"]["n"] == 8
    assert level["ramp"] == {"seconds": 0.4, "requests": len(ramp), "in_statistics": False}
    # when each was taken, against the ramp's end, is test_the_ramp_boundary_is_when_a_worker_takes_a_request
    assert min(r.sent_ns for r in ramp) < min(r.sent_ns for r in measured)
    # the stored figures are those of the measured records alone
    alone = summarize_level(measured, Level.closed(4), ramp_s=0.4)
    kept = stored.level_stats[(0, Level.closed(4))]
    assert kept.ttft_ms == alone.ttft_ms and kept.e2e_ms == alone.e2e_ms and kept.ramp_requests == len(ramp)


def test_the_ramp_boundary_is_when_a_worker_takes_a_request():
    """A request taken before t0 + R is the ramp's; after, measured. ``sent_ns`` is stamped later (when the
    headers are on the socket: a new connection first), so the boundary is checked on the take times."""
    taken: list[tuple[int, str]] = []
    records: list = []

    def make(index: int, phase: str, intended_ns: int | None) -> ClientRequest:
        taken.append((time.perf_counter_ns(), phase))
        body = {"prompt": "hello", "max_tokens": 4, "stream": True}
        return ClientRequest(
            path="/v1/completions", body=body, request_index=index, phase=phase, serial=index
        )

    async def level(url: str) -> LevelState:
        state = LevelState(warmup=0, stop=StopRule(requests=8))
        async with StreamClient(url) as client:
            await run_closed(client, 4, state, make, records.append, asyncio.Event(), ramp_s=0.4)
        return state

    with sim_process(*FAST) as url:
        state = asyncio.run(level(url))
    end = state.ramp_end_ns
    assert end is not None and len(records) == len(taken) and all(r.status == "ok" for r in records)
    ramp = [t for t, phase in taken if phase == "ramp"]
    measured = [t for t, phase in taken if phase == "measure"]
    assert len(measured) == 8 and len(ramp) > 4 and end <= min(measured)
    # make() reads the clock just after the take: a take recorded before the end was taken before it
    assert all(phase == "ramp" for t, phase in taken if t < end)
    assert all(r.sent_ns >= end for r in records if r.phase == "measure")
    # worker k starts at t0 + k·R/4: before t0 + R/4 only worker 0 takes, one request after another
    early = [r for r in records if r.sent_ns < end - 0.3e9]
    assert early and all(r.phase == "ramp" for r in early)
    assert all(a.end_ns <= b.sent_ns for a, b in itertools.pairwise(sorted(early, key=lambda r: r.sent_ns)))


def test_open_loop_ramp_sends_the_rising_schedule_first(tmp_path):
    with sim_process(*FAST) as url:
        result, stored = _run(
            url, tmp_path, rate=40.0, burstiness=math.inf, stop=StopRule(requests=10), ramp_s=0.5
        )
    (level,) = result["targets"][0]["levels"]
    sent = sorted((r for r in stored.requests if r.phase != "warmup"), key=lambda r: r.intended_ns)
    offsets, ramp_count = ramped_arrival_offsets_ns(40.0, 10, 0.5, burstiness=math.inf)
    assert [r.intended_ns - sent[0].intended_ns for r in sent] == offsets
    assert [r.phase for r in sent] == ["ramp"] * ramp_count + ["measure"] * 10 and ramp_count == 10
    assert level["requests"] == 10 and level["ramp"]["requests"] == 10 and level["lateness_ms"]["n"] == 10


def test_a_bad_ramp_is_one_line(capsys):
    assert main(["bench", "http://127.0.0.1:9", "--ramp", "-1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--ramp must be a number above 0" in err

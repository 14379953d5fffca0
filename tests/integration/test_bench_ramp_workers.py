"""`--ramp` over `--workers N` against `servelab sim`: real worker processes ramp the level as one process would.

Closed loop: the c users start at k·R/c across the workers, and the ramp ends at one instant for all of them
(a request taken before the common start + R is the ramp's). Open loop: the one seeded ramped schedule,
dealt over the workers. The ramp's records are stored, flagged, and in no figure. Phases are checked on take
times (tests/fleet_sim.py `TakeLog`, written in the worker processes), not on ``sent_ns``, which is stamped
later (see test_bench_ramp.py::test_the_ramp_boundary_is_when_a_worker_takes_a_request).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
from pathlib import Path

import pytest

from servelab.bench.config import BenchConfig
from servelab.bench.level import LevelState
from servelab.bench.maker import PromptSlot
from servelab.bench.ramp import closed_start_offsets_ns, ramped_arrival_offsets_ns
from servelab.bench.runner import run
from servelab.bench.schedule import StopRule
from servelab.bench.summary import summarize_level
from servelab.bench.worker_core import ClientSpec
from servelab.bench.workers import open_fleet
from servelab.bench.workloads import WorkloadSpec
from servelab.results.level_key import Level
from servelab.store import Store
from tests.bench_sim import sim_process, sim_requests_seen
from tests.fleet_sim import TakeLog, takes

pytestmark = pytest.mark.timing  # wall-clock figures against the sim: run with no other test beside it

FAST = ("--ttft-ms", "5", "--itl-ms", "5")
RAMP_S = 1.0


def _run(url: str, tmp_path: Path, **kw):
    config = BenchConfig(targets=(url,), workload=WorkloadSpec("short", 8, 4), workers=2, **kw)
    with Store.open(tmp_path / "r.db") as store:
        result = run(config, store)
        return result.to_json()["targets"][0]["levels"][0], store.load_run(result.run_id)


def test_a_closed_ramp_over_two_workers_stores_every_record_flagged_and_figures_as_one_process(tmp_path):
    with sim_process(*FAST) as url:
        level, stored = _run(url, tmp_path, concurrency=(4,), stop=StopRule(requests=16), ramp_s=RAMP_S)
        seen = sim_requests_seen(url)
    ramp = [r for r in stored.requests if r.phase == "ramp"]
    measured = [r for r in stored.requests if r.phase == "measure"]
    assert seen == len(stored.requests) == len(ramp) + len(measured)  # no request lost, no warm-up
    assert len({r.request_id for r in stored.requests}) == len(stored.requests)
    assert len(measured) == 16 and ramp and all(r.status == "ok" for r in stored.requests)
    assert level["requests"] == 16 and level["ttft_ms"]["n"] == 16
    assert level["ramp"] == {"seconds": RAMP_S, "requests": len(ramp), "in_statistics": False}
    assert sum(w["records"] for w in level["client"]["workers"]) == len(stored.requests)
    # the merged level is what one process computes from the same records: the ramp's left out
    (kept,) = stored.level_stats.values()
    assert kept == summarize_level(stored.requests, Level.closed(4), ramp_s=RAMP_S)
    assert kept.ttft_ms == summarize_level(measured, Level.closed(4), ramp_s=RAMP_S).ttft_ms


def test_an_open_ramp_over_two_workers_sends_the_one_ramped_schedule(tmp_path):
    with sim_process(*FAST) as url:
        level, stored = _run(
            url, tmp_path, rate=40.0, burstiness=math.inf, stop=StopRule(requests=10), ramp_s=0.5
        )
        seen = sim_requests_seen(url)
    sent = sorted((r for r in stored.requests if r.phase != "warmup"), key=lambda r: r.intended_ns)
    offsets, ramp_count = ramped_arrival_offsets_ns(40.0, 10, 0.5, burstiness=math.inf)
    assert seen == len(stored.requests) == len(offsets)
    assert [r.intended_ns - sent[0].intended_ns for r in sent] == offsets
    assert [r.phase for r in sent] == ["ramp"] * ramp_count + ["measure"] * 10 and ramp_count == 10
    assert [w["records"] for w in level["client"]["workers"]] == [10, 10]  # dealt round-robin
    assert level["requests"] == 10 and level["ramp"]["requests"] == 10 and level["lateness_ms"]["n"] == 10
    (kept,) = stored.level_stats.values()
    assert kept == summarize_level(stored.requests, Level.open(40.0), ramp_s=0.5)


def _maker(log: Path) -> TakeLog:
    body = {"prompt": "hello", "max_tokens": 4, "stream": True}
    slots = tuple(PromptSlot(body, json.dumps(body).encode(), k) for k in range(4))
    return TakeLog("/v1/completions", 0, "c=4", 0, 0, slots, log=str(log))


def test_every_worker_ends_the_ramp_at_the_same_instant_and_starts_its_users_at_their_offsets(tmp_path):
    """On take times, in the worker processes: before t0 + R only ramp requests, from it only measured ones
    (both workers read one CLOCK_MONOTONIC; the common start is on it);
        user k of 4 starts at t0 + k·R/4 on worker k mod 2, so before its second user starts a worker's takes are
        one user's, each after the previous request ended."""
    log = tmp_path / "takes.log"
    records: list = []

    async def level(url: str):
        config = BenchConfig(
            targets=(url,), concurrency=(4,), stop=StopRule(requests=12), ramp_s=RAMP_S, workers=2, warmup=0
        )
        fleet = await open_fleet(config)
        assert fleet is not None
        state = LevelState(warmup=0, stop=config.stop)
        try:
            out = await fleet.level(
                config,
                ClientSpec(url=url),
                _maker(log),
                4,
                None,
                state,
                records.append,
                asyncio.Event(),
                True,
            )
        finally:
            await fleet.close()
        return state, out

    with sim_process(*FAST) as url:
        state, out = asyncio.run(level(url))
        seen = sim_requests_seen(url)
    taken = takes(log)
    end = state.ramp_end_ns
    assert end is not None and end == state.start_ns
    t0 = end - round(RAMP_S * 1e9)
    assert seen == len(records) == len(taken) and all(r.status == "ok" for r in records)
    ramp = [t for t, _, phase, _ in taken if phase == "ramp"]
    measured = [t for t, _, phase, _ in taken if phase == "measure"]
    # a take is written down just after the worker read the clock to choose its phase: one written before
    # the end was chosen before it (the ramp's); a measured one was chosen, and so written, at or after it
    assert len(measured) == 12 and ramp and t0 <= min(ramp) and end <= min(measured)
    assert all(phase == "ramp" for t, _, phase, _ in taken if t < end)
    assert all(r.sent_ns >= end for r in records if r.phase == "measure")
    serials = [serial for _, serial, _, _ in taken]
    assert sorted(s for _, s, phase, _ in taken if phase == "measure") == list(range(12))
    assert len(set(serials)) == len(serials) and all(s >= 12 for _, s, phase, _ in taken if phase == "ramp")
    ended = {int(r.request_id.rsplit("-", 1)[1]): r.end_ns for r in records}
    pids = [w["pid"] for w in out.client["workers"]]
    starts = closed_start_offsets_ns(4, RAMP_S)  # worker 0: users 0 and 2; worker 1: users 1 and 3
    for k, pid in enumerate(pids):
        mine = sorted((t, s) for t, s, _, p in taken if p == pid)
        assert mine and mine[0][0] >= t0 + starts[k]  # its first user's start
        alone = [(t, s) for t, s in mine if t < t0 + starts[k + 2]]  # before its second user starts
        assert alone or k == 1  # worker 0's first user starts at t0 itself
        assert all(ended[a] <= b_t for (_, a), (b_t, _) in itertools.pairwise(alone))

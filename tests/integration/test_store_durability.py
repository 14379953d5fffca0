"""Durable as promised: a store locked by another process, and a bench SIGKILLed at random moments.

Real parts only: `servelab sim` and `servelab bench` as processes on loopback, a second process holding the
store's write lock (BEGIN IMMEDIATE), real SIGKILL. perf_counter_ns is CLOCK_MONOTONIC, shared by processes,
so the sim's /sim/requests log, the locker's stamps and the stored records share one clock.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import pytest

from servelab.store import Store
from servelab.store.journal import journal_dir
from tests.bench_sim import sim_process, sim_requests_seen

pytestmark = pytest.mark.timing  # wall-clock figures against the sim: run with no other test beside it

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-c", "import sys; from servelab.cli.app import main; sys.exit(main())"]
LOCKER = textwrap.dedent(
    """
    import sqlite3, sys, time
    db = sqlite3.connect(sys.argv[1], isolation_level=None)
    db.execute("BEGIN IMMEDIATE")
    print(time.perf_counter_ns(), flush=True)
    time.sleep(float(sys.argv[2]))
    print(time.perf_counter_ns(), flush=True)
    db.execute("COMMIT")
    """
)


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), **extra}


def _bench(url: str, db: Path, *args: str, env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(
        [
            *CLI,
            "bench",
            url,
            "--db",
            str(db),
            "--input-tokens",
            "16",
            "--output-tokens",
            "16",
            "--json",
            *args,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _lock_while_running(url: str, db: Path, hold_s: float) -> tuple[int, int]:
    """Once the sim has seen a few requests of this bench, hold the store's write lock for `hold_s`."""
    while sim_requests_seen(url) < 4:
        time.sleep(0.02)
    locker = subprocess.run(
        [sys.executable, "-c", LOCKER, str(db), str(hold_s)], capture_output=True, text=True, check=True
    )
    taken, released = (int(line) for line in locker.stdout.split())
    return taken, released


def test_a_store_locked_for_seconds_loses_nothing_and_the_level_it_blocked_is_not_valid(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.db"
    with sim_process("--itl-ms", "5", "--ttft-ms", "10") as url:
        bench = _bench(url, db, "--concurrency", "2", "--requests", "100", env=_env())
        taken, released = _lock_while_running(url, db, 2.5)
        out, err = bench.communicate(timeout=120)
        seen = sim_requests_seen(url)
    assert bench.returncode == 0, err
    (level,) = json.loads(out)["targets"][0]["levels"]
    assert level["valid"] is False
    assert level["invalid_reason"].startswith("result store blocked for")
    assert level["client"]["store_blocked_s"] >= 2.0
    with Store.open(db, must_exist=True) as store:
        (info,) = store.list_runs()
        requests = store.load_run(info.id).requests
    assert info.status == "finished" and info.partial is False
    assert len(requests) == seen  # every request the sim answered is stored
    during = [r for r in requests if taken < r.end_ns < released]
    assert len(during) >= 10  # the client kept measuring while the store was locked
    assert not journal_dir(db).exists()  # all in SQLite: the journal is gone


def test_a_store_locked_past_its_patience_stops_the_run_with_one_line_and_keeps_the_records(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.db"
    env = _env(SERVELAB_STORE_BUSY_S="0.3")  # 3 waits of 0.3 s, then the write fails for good
    with sim_process("--itl-ms", "5", "--ttft-ms", "10") as url:
        bench = _bench(url, db, "--concurrency", "2", "--requests", "100", env=env)
        _lock_while_running(url, db, 3.0)
        out, err = bench.communicate(timeout=120)
        seen = sim_requests_seen(url)
    assert bench.returncode == 1
    assert out == ""
    (line,) = err.strip().splitlines()[-1:]
    assert line.startswith("servelab: error:") and "database is locked" in line, err
    assert "Traceback" not in err
    journal = next(journal_dir(db).glob("*.jsonl"))
    assert str(journal) in line
    assert len(journal.read_bytes().splitlines()) == seen  # every finished request is in the journal
    listed = subprocess.run(
        [*CLI, "runs", "--db", str(db), "--json"], capture_output=True, text=True, env=_env()
    )
    assert listed.returncode == 0, listed.stderr
    (run,) = json.loads(listed.stdout)
    assert run["status"] == "interrupted" and run["partial"] is True
    with Store.open(db, must_exist=True) as store:
        assert len(store.load_run(run["id"]).requests) == seen  # `servelab runs` stored the journal's records
    assert not journal_dir(db).exists()


def test_a_store_still_locked_when_the_load_ends_is_waited_for_out_loud_and_loses_nothing(
    tmp_path: Path,
) -> None:
    """Three levels whose load ends while another process still holds the lock: the run says on stderr what
    it waits for (it does not look hung), then stores every request of every level and exits 0."""
    db = tmp_path / "runs.db"
    with sim_process("--itl-ms", "5", "--ttft-ms", "10") as url:
        bench = _bench(url, db, "--concurrency", "1,2,4", "--requests", "8", env=_env())
        _taken, released = _lock_while_running(url, db, 6.0)
        out, err = bench.communicate(timeout=120)
        ended = time.perf_counter_ns()
        seen = sim_requests_seen(url)
    assert bench.returncode == 0, err
    assert "waiting for the result store" in err and "another process holds its lock" in err, err
    assert ended > released
    levels = json.loads(out)["targets"][0]["levels"]
    assert [level["level"] for level in levels] == ["c=1", "c=2", "c=4"]
    with Store.open(db, must_exist=True) as store:
        (info,) = store.list_runs()
        requests = store.load_run(info.id).requests
    assert info.status == "finished"
    assert len(requests) == seen >= 24
    assert not journal_dir(db).exists()


def _finished_by(url: str, since_ns: int, before_ns: int) -> set[str]:
    """Request ids whose last chunk the sim wrote after `since_ns` and before `before_ns`."""
    with urllib.request.urlopen(url + "/sim/requests", timeout=5) as response:
        log = json.loads(response.read())
    return {
        rid
        for rid, entry in log.items()
        if entry["t0_ns"] >= since_ns and entry["chunks_ns"] and entry["chunks_ns"][-1] <= before_ns
    }


def test_sigkill_at_random_moments_loses_no_request_that_finished_50_ms_before(tmp_path: Path) -> None:
    rng = random.Random(14)
    db = tmp_path / "runs.db"
    checked = 0
    with sim_process("--itl-ms", "3", "--ttft-ms", "5") as url:
        for _ in range(10):
            start_ns = time.perf_counter_ns()
            bench = _bench(url, db, "--concurrency", "1,2,4", "--requests", "30", env=_env())
            first = sim_requests_seen(url)
            while sim_requests_seen(url) == first and bench.poll() is None:
                time.sleep(0.01)
            time.sleep(rng.uniform(0.0, 2.5))
            kill_ns = time.perf_counter_ns()
            bench.send_signal(signal.SIGKILL)
            bench.communicate(timeout=10)
            must_have = _finished_by(url, start_ns, kill_ns - 50_000_000)
            with Store.open(db) as store:  # opening replays the dead bench's journal
                stored = {r.request_id for r in store.load_run(store.list_runs()[-1].id).requests}
            assert must_have <= stored, sorted(must_have - stored)
            checked += len(must_have)
            assert not journal_dir(db).exists()
    assert checked >= 100  # the kills fell mid-run, not only before the first request

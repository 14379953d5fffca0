"""What a killed or blocked bench loses, against `servelab sim` on loopback; runs against any servelab tree.

    PYTHONPATH=TREE python benchmarks/store_kill_loss.py [--kills 10] [--lock-s 5]

(without PYTHONPATH: this checkout). Measured on a shared 2-vCPU VM, 10 kills, 5 s lock:
before (journal-less batched sink, main at 290e61c): 27 of 259 finished requests lost, client frozen 4.93 s;
after: 0 of 254 lost, longest gap 0.10 s, the level not valid ("result store blocked for …").

Kills `servelab bench` (3 levels) with SIGKILL at seeded random moments and counts the requests the sim
finished ≥ 50 ms before the kill that are not in the store afterwards; then holds the store's write lock
(BEGIN IMMEDIATE, another process) for --lock-s during a level and prints the longest gap between
consecutive request ends in that window (the client frozen) and the level's verdict.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

if "PYTHONPATH" not in os.environ:  # else the tree it names (e.g. the code before a change)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import servelab
from servelab.store import Store
from tests.bench_sim import sim_process, sim_requests_seen

TREE = Path(servelab.__file__).resolve().parents[1]  # the benches run this same code
CLI = [sys.executable, "-c", "import sys; from servelab.cli.app import main; sys.exit(main())"]
LOCKER = (
    "import sqlite3, sys, time; d = sqlite3.connect(sys.argv[1], isolation_level=None); d.execute('BEGIN IMMEDIATE');"
    " print(time.perf_counter_ns(), flush=True); time.sleep(float(sys.argv[2])); print(time.perf_counter_ns(), flush=True)"
)


def bench(url: str, db: Path, levels: str, requests: int) -> subprocess.Popen:
    args = ["bench", url, "--db", str(db), "--concurrency", levels, "--requests", str(requests), "--json"]
    return subprocess.Popen(
        [*CLI, *args, "--output-tokens", "16"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=db.parent,
        env={**os.environ, "PYTHONPATH": str(TREE)},
    )


def finished_before(url: str, since_ns: int, before_ns: int) -> set[str]:
    with urllib.request.urlopen(url + "/sim/requests") as response:
        log = json.loads(response.read())
    return {
        k
        for k, e in log.items()
        if e["t0_ns"] >= since_ns and e["chunks_ns"] and e["chunks_ns"][-1] <= before_ns
    }


def kills(url: str, tmp: Path, n: int) -> tuple[int, int]:
    rng, db, finished, lost = random.Random(14), tmp / "kill.db", 0, 0
    for _ in range(n):
        start_ns = time.perf_counter_ns()
        proc = bench(url, db, "1,2,4", 30)
        first = sim_requests_seen(url)
        while sim_requests_seen(url) == first and proc.poll() is None:
            time.sleep(0.01)
        time.sleep(rng.uniform(0.0, 2.5))
        kill_ns = time.perf_counter_ns()
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
        done = finished_before(url, start_ns, kill_ns - 50_000_000)
        with Store.open(db) as store:
            stored = {r.request_id for r in store.load_run(store.list_runs()[-1].id).requests}
        finished, lost = finished + len(done), lost + len(done - stored)
    return finished, lost


def lock(url: str, tmp: Path, hold_s: float) -> tuple[float, str, int]:
    db = tmp / "lock.db"
    proc = bench(url, db, "2", 150)
    while sim_requests_seen(url) < 4:
        time.sleep(0.02)
    locker = subprocess.Popen(
        [sys.executable, "-c", LOCKER, str(db), str(hold_s)], stdout=subprocess.PIPE, text=True
    )
    assert locker.stdout is not None
    taken, released = int(locker.stdout.readline()), int(locker.stdout.readline())
    locker.wait()
    out, _ = proc.communicate()
    with Store.open(db) as store:
        ends = sorted(r.end_ns for r in store.load_run(store.list_runs()[-1].id).requests)
    window = [taken, *[e for e in ends if taken < e < released], released]
    gap_s = max(b - a for a, b in itertools.pairwise(window)) / 1e9
    level = json.loads(out)["targets"][0]["levels"][0] if proc.returncode == 0 else {"valid": None}
    why = (level.get("invalid_reason") or "")[:40]
    return (
        gap_s,
        f"valid={level['valid']} ({why}…) exit={proc.returncode}",
        len(ends) - sim_requests_seen(url),
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--lock-s", type=float, default=5.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, sim_process("--itl-ms", "3", "--ttft-ms", "5") as url:
        finished, lost = kills(url, Path(tmp), args.kills)
    with tempfile.TemporaryDirectory() as tmp, sim_process("--itl-ms", "5", "--ttft-ms", "10") as url:
        gap_s, verdict, missing = lock(url, Path(tmp), args.lock_s)
    print(f"{'case':<34} {'figure':<60}")
    print(f"{f'SIGKILL x{args.kills}':<34} {finished} finished >= 50 ms before a kill, {lost} not stored")
    print(
        f"{f'store locked {args.lock_s:g} s':<34} longest gap between request ends {gap_s:.2f} s, level {verdict}"
    )
    print(f"{'':<34} stored - requests the sim saw = {missing}")


if __name__ == "__main__":
    main()

"""Helpers for the fleet tests (bench --workers / --ray) against `servelab sim` on loopback."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import psutil

from servelab.bench.client import ClientRequest
from servelab.bench.maker import RequestMaker

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-c", "import sys; from servelab.cli.app import main; sys.exit(main())"]


def env(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), **extra}


def bench(url: str, db: Path, *args: str, environ: dict[str, str] | None = None, **popen) -> subprocess.Popen:
    return subprocess.Popen(
        [*CLI, "bench", url, "--db", str(db), "--input-tokens", "16", "--json", "--no-power", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environ or env(),
        **popen,
    )


def stored_count(db: Path) -> int:
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(db, timeout=1) as conn:
            return conn.execute("SELECT count(*) FROM requests").fetchone()[0]
    except sqlite3.Error:
        return 0


def wait_stored(db: Path, proc: subprocess.Popen, at_least: int, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while stored_count(db) < at_least:
        if proc.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"bench ended or stalled before {at_least} records: {proc.communicate()}")
        time.sleep(0.02)


def worker_pids(bench_pid: int) -> list[int]:
    """The bench's local worker processes, in the order of their worker index (the argv's fd is not it)."""
    children = psutil.Process(bench_pid).children()
    return [c.pid for c in children if "servelab.bench.worker_main" in " ".join(c.cmdline())]


def sim_log(url: str) -> dict:
    with urllib.request.urlopen(url + "/sim/requests", timeout=5) as response:
        return json.loads(response.read())


def finished_before(url: str, before_ns: int) -> set[str]:
    """Request ids whose last chunk the sim wrote before `before_ns` (one clock: CLOCK_MONOTONIC)."""
    return {rid for rid, e in sim_log(url).items() if e["chunks_ns"] and e["chunks_ns"][-1] <= before_ns}


@dataclass(frozen=True)
class TakeLog(RequestMaker):
    """A level's requests as `RequestMaker` makes them, each take written down first ("ns serial phase pid" to
    ``log``): pickled to the real worker processes, it shows when each worker took each request."""

    log: str = ""

    def __call__(self, serial: int, phase: str, intended_ns: int | None) -> ClientRequest:
        taken = time.perf_counter_ns()
        with open(self.log, "a", encoding="utf-8") as out:
            out.write(f"{taken} {serial} {phase} {os.getpid()}\n")
        return super().__call__(serial, phase, intended_ns)


def takes(log: Path) -> list[tuple[int, int, str, int]]:
    """(taken_ns, serial, phase, pid) of each request a `TakeLog` made, in the order written."""
    rows = [line.split() for line in log.read_text(encoding="utf-8").splitlines()]
    return [(int(t), int(serial), phase, int(pid)) for t, serial, phase, pid in rows]

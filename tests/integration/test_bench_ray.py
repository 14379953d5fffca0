"""`servelab bench --ray HOST:PORT --workers 2` on a real Ray cluster on loopback: a head and a worker node
started here (`ray start --block`, token authentication with a token made for the test), no mock.

Both nodes are this machine, so the true offset between any worker's clock and the coordinator's is 0:
the offset Ray's round trips estimate must lie within the bound the level records.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from servelab.bench.summary import summarize_level
from servelab.results.level_key import Level
from servelab.store import Store
from tests.bench_sim import sim_process
from tests.fleet_sim import bench, env, finished_before, wait_stored

pytestmark = pytest.mark.ray

RAY = str(Path(sys.executable).with_name("ray"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ray_start(args: list[str], environ: dict[str, str]) -> subprocess.Popen:
    """`ray start ... --block` in its own process group (what it starts goes with it)."""
    return subprocess.Popen(
        [
            RAY,
            "start",
            "--node-ip-address",
            "127.0.0.1",
            "--num-cpus",
            "1",
            "--block",
            "--disable-usage-stats",
            *args,
        ],
        env=environ,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def _stop(proc: subprocess.Popen) -> None:
    """Stop one `ray start --block` and everything in its group: what this test started, nothing else.

    SIGTERM goes to `ray start` alone, which shuts its node down (~5 s); sent to the whole group, it leaves a
    head waiting on processes already gone until the SIGKILL. Then SIGKILL to the group's stragglers."""
    proc.terminate()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=20)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


@pytest.fixture
def ray_cluster(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[str, dict[str, str], subprocess.Popen]]:
    """(address, environment for its clients, the worker node's process): a head and one worker node."""
    port = _free_port()
    home = tmp_path_factory.mktemp("ray-home")
    environ = env(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=secrets.token_hex(16), HOME=str(home))
    temp = tmp_path_factory.mktemp("ray")
    head = _ray_start(
        ["--head", "--port", str(port), "--include-dashboard", "false", "--temp-dir", str(temp)], environ
    )
    node = None
    try:
        _wait_port(port, head)
        node = _ray_start(["--address", f"127.0.0.1:{port}"], environ)
        yield f"127.0.0.1:{port}", environ, node
    finally:
        if node is not None:
            _stop(node)
        _stop(head)


def _wait_port(port: int, proc: subprocess.Popen, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"ray start --head exited with {proc.returncode}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise RuntimeError("the Ray head did not listen in time")


def test_ray_workers_on_two_nodes_store_every_record_and_record_the_clock_bound(tmp_path, ray_cluster):
    address, environ, _node = ray_cluster
    db = tmp_path / "runs.db"
    with sim_process("--itl-ms", "5", "--ttft-ms", "10") as url:
        proc = bench(
            url,
            db,
            "--ray",
            address,
            "--workers",
            "2",
            "--concurrency",
            "2",
            "--requests",
            "20",
            "--output-tokens",
            "16",
            environ=environ,
        )
        out, err = proc.communicate(timeout=300)
        seen = finished_before(url, time.perf_counter_ns())
    assert proc.returncode == 0, err
    (level,) = json.loads(out)["targets"][0]["levels"]
    workers = level["client"]["workers"]
    assert len({w["node"] for w in workers}) == 2  # spread: one actor per node
    assert level["client"]["clock_source"] == "round trips"
    assert level["client"]["clock_bound_ms"] == max(w["clock_bound_ms"] for w in workers) > 0
    for w in workers:  # one machine: the true offset is 0, so the estimate must be within its bound
        assert abs(w["clock_offset_ns"]) / 1e6 <= w["clock_bound_ms"], w
    with Store.open(db, must_exist=True) as store:
        (info,) = store.list_runs()
        stored = store.load_run(info.id)
    assert {r.request_id for r in stored.requests} == seen and len(stored.requests) == 22
    assert [w["records"] for w in workers] == [11, 11]
    (stats,) = stored.level_stats.values()
    assert stats == summarize_level(stored.requests, Level.closed(2))
    (row,) = [lv for lv in stored.levels]
    assert row.summary.client["clock_bound_ms"] == level["client"]["clock_bound_ms"]  # kept in the store


def test_a_killed_ray_node_loses_only_its_requests_in_flight(tmp_path, ray_cluster):
    address, environ, node = ray_cluster
    db = tmp_path / "runs.db"
    with sim_process("--itl-ms", "3", "--ttft-ms", "5") as url:
        proc = bench(
            url,
            db,
            "--ray",
            address,
            "--workers",
            "2",
            "--concurrency",
            "2",
            "--requests",
            "200",
            "--output-tokens",
            "16",
            environ=environ,
        )
        wait_stored(db, proc, 20, timeout_s=240)
        kill_ns = time.perf_counter_ns()
        os.killpg(node.pid, signal.SIGKILL)  # the worker node and every process on it
        out, err = proc.communicate(timeout=300)
        must_have = finished_before(url, kill_ns - 200_000_000)  # Ray ships in batches: 200 ms of slack
    assert proc.returncode == 0, err
    (level,) = json.loads(out)["targets"][0]["levels"]
    assert level["partial"] is True and level["valid"] is False
    assert "lost mid-level" in level["invalid_reason"]
    with Store.open(db, must_exist=True) as store:
        (info,) = store.list_runs()
        requests = store.load_run(info.id).requests
    stored = {r.request_id for r in requests}
    assert must_have <= stored, sorted(must_have - stored)
    survivor = next(w for w in level["client"]["workers"] if not w["died"])
    assert survivor["records"] == 1 + 100  # its warm-up and its whole share


def test_a_closed_ramp_over_ray_workers_stores_the_ramp_flagged_and_the_level_as_one_process(
    tmp_path, ray_cluster
):
    """The users start at k·R/c across the two nodes' workers, the ramp ending at the common start + R on each
    worker's own clock; the merged level is what one process computes from the same records."""
    address, environ, _node = ray_cluster
    db = tmp_path / "runs.db"
    with sim_process("--itl-ms", "5", "--ttft-ms", "5") as url:
        proc = bench(
            url,
            db,
            "--ray",
            address,
            "--workers",
            "2",
            "--concurrency",
            "4",
            "--requests",
            "16",
            "--output-tokens",
            "4",
            "--ramp",
            "1",
            environ=environ,
        )
        out, err = proc.communicate(timeout=300)
        seen = finished_before(url, time.perf_counter_ns())
    assert proc.returncode == 0, err
    (level,) = json.loads(out)["targets"][0]["levels"]
    with Store.open(db, must_exist=True) as store:
        (info,) = store.list_runs()
        stored = store.load_run(info.id)
    ramp = [r for r in stored.requests if r.phase == "ramp"]
    measured = [r for r in stored.requests if r.phase == "measure"]
    assert {r.request_id for r in stored.requests} == seen and len(stored.requests) == len(ramp) + len(
        measured
    )
    assert (
        len(measured) == 16
        and ramp
        and level["ramp"] == {"seconds": 1.0, "requests": len(ramp), "in_statistics": False}
    )
    assert sum(w["records"] for w in level["client"]["workers"]) == len(stored.requests)
    (stats,) = stored.level_stats.values()
    assert stats == summarize_level(stored.requests, Level.closed(4), ramp_s=1.0)

"""What `servelab bench --workers N` (and `--ray local --workers N`) sustains against `servelab sim` on loopback.

Each row is one real `bench` run through the library (coordinator, workers, store): a closed-loop level of
STREAMS streams of 1-token chunks every ITL ms for DURATION s. "events/s" is the level's output tok/s
(one SSE event per token) over its steady window, as the bench computes it from the merged records;
"stamp err" is each content chunk's stamp (mapped onto the coordinator's clock) minus when the sim wrote it
(/sim/requests, the same CLOCK_MONOTONIC on one host), over the steady window. "1 process" is the default
bench (no workers), the baseline. "clock ±" is the bound the level recorded on its workers' clock
alignment (0 on one machine: one clock; Ray: round trips). "valid" is the bench's own verdict on its
workers (loop lag, late wake-ups, CPU). On a machine with few cores the sim and the workers share them: the
sim is pinned to the last CPU, the workers take what the bench pins them to (bench/workers.py).

    python benchmarks/scale_out.py [--streams 50,100,200] [--workers 1,2] [--duration 3] [--ray] [--itl-ms 5]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from servelab.bench.config import BenchConfig  # noqa: E402  (after the path above)
from servelab.bench.metrics import percentile  # noqa: E402
from servelab.bench.runner import run  # noqa: E402
from servelab.bench.schedule import StopRule  # noqa: E402
from servelab.bench.workloads import WorkloadSpec  # noqa: E402
from servelab.store import Store  # noqa: E402


@contextlib.contextmanager
def sim(itl_ms: float):
    cmd = [sys.executable, "-c", "import sys; from servelab.cli.app import main; sys.exit(main())", "sim"]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    proc = subprocess.Popen([*cmd, "--port", "0", "--json", "--ttft-ms", "5", "--itl-ms", str(itl_ms)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)  # fmt: skip
    try:
        url = json.loads(proc.stdout.readline())["url"]
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) > 1:
            os.sched_setaffinity(proc.pid, {cpus[-1]})
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def row(url: str, streams: int, workers: int | None, ray: str | None, duration_s: float, tokens: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp, Store.open(Path(tmp) / "runs.db") as store:
        config = BenchConfig(
            targets=(url,), concurrency=(streams,), workload=WorkloadSpec("short", 16, tokens),
            stop=StopRule(duration_s=duration_s), workers=workers, ray=ray,
        )  # fmt: skip
        result = run(config, store)
        stored = store.load_run(result.run_id)
    with urllib.request.urlopen(url + "/sim/requests", timeout=60) as response:
        log = json.loads(response.read())
    level = result.targets[0].levels[0]
    window = level.stats.window
    errors = [
        (stamp - wrote) / 1e6
        for r in stored.requests
        if r.phase == "measure" and r.request_id in log
        for stamp, wrote in zip(r.chunk_ns, log[r.request_id]["chunks_ns"], strict=False)
        if window is not None and window.t0_ns <= stamp <= window.t1_ns
    ]
    return {
        "mode": "1 process" if workers is None else f"{'ray' if ray else 'local'} x{workers}",
        "streams": streams, "events_s": level.stats.output_tok_s, "err_p50_ms": percentile(errors, 50),
        "err_p99_ms": percentile(errors, 99), "clock_ms": level.client.get("clock_bound_ms"),
        "valid": level.valid, "requests": level.stats.requests, "errors": level.stats.errors,
    }  # fmt: skip


def print_row(r: dict) -> None:
    clock = "-" if r["clock_ms"] is None else f"±{r['clock_ms']:.3f}"
    print(f"{r['mode']:>10} {r['streams']:>7} {r['events_s']:>10,.0f} {r['err_p50_ms']:>9.3f} {r['err_p99_ms']:>9.3f} "
          f"{clock:>8} {r['requests']:>6} {r['errors']:>4} {'yes' if r['valid'] else 'NO':>5}", flush=True)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", default="50,100,200")
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--duration", type=float, default=3.0)
    parser.add_argument("--itl-ms", type=float, default=5.0)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument(
        "--ray", action="store_true", help="also through a local Ray (ray.init on this machine)"
    )
    args = parser.parse_args()
    streams = [int(x) for x in args.streams.split(",")]
    counts = [int(x) for x in args.workers.split(",")]
    modes: list[tuple[int | None, str | None]] = [(None, None), *((n, None) for n in counts)]
    if args.ray:
        modes += [(n, "local") for n in counts]
    print(f"{os.cpu_count()} CPUs; sim ITL {args.itl_ms:g} ms, 1 token per chunk, {args.tokens} tokens per request, "
          f"{args.duration:g} s per level")  # fmt: skip
    print(f"{'mode':>10} {'streams':>7} {'events/s':>10} {'err p50':>9} {'err p99':>9} {'clock':>8} {'reqs':>6} "
          f"{'errs':>4} {'valid':>5}")  # fmt: skip
    with sim(args.itl_ms) as url:
        for count in streams:
            for workers, ray in modes:
                print_row(row(url, count, workers, ray, args.duration, args.tokens))


if __name__ == "__main__":
    main()

"""What `servelab bench --workers N` (and `--ray local --workers N`) sustains against `servelab sim` on loopback.

Each row is one real `bench` run through the library (coordinator, workers, store): a closed-loop level of
STREAMS streams of 1-token chunks every ITL ms for DURATION s. "events/s" is the level's output tok/s
(one SSE event per token) over its steady window, as the bench computes it from the merged records;
"stamp err" is each content chunk's stamp (mapped onto the coordinator's clock) minus when the sim wrote it
(/sim/requests, the same CLOCK_MONOTONIC on one host), over the steady window. "1 process" is the default
bench (no workers), the baseline. "clock ±" is the bound the level recorded on its workers' clock
alignment (0 on one machine: one clock; Ray: round trips). "valid" is the bench's own verdict on its
workers (loop lag, late wake-ups, CPU). On a machine with few cores the sim and the workers share them: the
sims are pinned to the last CPUs, the workers take what the bench pins them to (bench/workers.py).

``--sims K`` for when one sim cannot feed the workers: K sims, each pinned to a CPU of its own (the last K),
and K bench runs at once (each its own process), one per sim, each with STREAMS/K of the streams and N/K of
the workers (mode "2x local x1": two runs of one worker each) (a worker count K does not divide is skipped: one worker has one target). bench runs its
targets one after another, never as one pool, so a row with K sims is K runs side by side, started at one
instant: "events/s" is the tokens all K received within the intersection of their steady windows over its
length (CLOCK_MONOTONIC, one host), the stamp errors are pooled over the K runs' chunks, "valid" holds when
every run's level is valid.

    python benchmarks/scale_out.py [--streams 50,100,200] [--workers 1,2] [--sims 1,2] [--duration 3] [--ray]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from servelab.bench.config import BenchConfig  # noqa: E402  (after the path above)
from servelab.bench.metrics import percentile  # noqa: E402
from servelab.bench.runner import run  # noqa: E402
from servelab.bench.schedule import StopRule  # noqa: E402
from servelab.bench.workloads import WorkloadSpec  # noqa: E402
from servelab.store import Store  # noqa: E402

SIDE_BY_SIDE_LEAD_NS = 8_000_000_000  # --sims K: the K runs start this long after they are handed out


@contextlib.contextmanager
def sims(itl_ms: float, count: int):
    """``count`` sims, sim k pinned to the k-th CPU from the last (where there are that many); their URLs."""
    cmd = [sys.executable, "-c", "import sys; from servelab.cli.app import main; sys.exit(main())", "sim"]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    cpus = sorted(os.sched_getaffinity(0))
    procs: list[subprocess.Popen] = []
    try:
        urls = []
        for k in range(count):
            proc = subprocess.Popen(
                [*cmd, "--port", "0", "--json", "--ttft-ms", "5", "--itl-ms", str(itl_ms)],
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
                env=env,
            )
            procs.append(proc)
            urls.append(json.loads(proc.stdout.readline())["url"])
            if len(cpus) > 1:
                os.sched_setaffinity(proc.pid, {cpus[-1 - k % len(cpus)]})
        yield urls
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=10)


def row(
    url: str,
    streams: int,
    workers: int | None,
    ray: str | None,
    duration_s: float,
    tokens: int,
    start_ns: int | None = None,
) -> dict:
    """One bench run against ``url`` (from ``start_ns`` on CLOCK_MONOTONIC, when given: runs side by side
    start together)."""
    while start_ns is not None and (wait := start_ns - time.perf_counter_ns()) > 0:
        time.sleep(wait / 1e9)
    with tempfile.TemporaryDirectory() as tmp, Store.open(Path(tmp) / "runs.db") as store:
        config = BenchConfig(
            targets=(url,),
            concurrency=(streams,),
            workload=WorkloadSpec("short", 16, tokens),
            stop=StopRule(duration_s=duration_s),
            workers=workers,
            ray=ray,
        )
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
    chunks = [
        (stamp, n)
        for r in stored.requests
        if r.phase == "measure" and r.status == "ok"
        for stamp, n in zip(r.chunk_ns, r.chunk_tokens, strict=True)
    ]
    return {
        "events_s": level.stats.output_tok_s,
        "stamp_errors_ms": errors,
        "clock_ms": level.client.get("clock_bound_ms"),
        "valid": level.valid,
        "requests": level.stats.requests,
        "errors": level.stats.errors,
        "window": None if window is None else (window.t0_ns, window.t1_ns),
        "chunks": chunks,
    }


def together_events_s(runs: list[dict]) -> float:
    """Events/s of runs side by side: the tokens all of them received within the seconds every one's steady
    window covers (their intersection), over its length; 0 when the windows do not meet."""
    windows = [r["window"] for r in runs]
    if any(w is None for w in windows):
        return 0.0
    t0, t1 = max(w[0] for w in windows), min(w[1] for w in windows)
    if t1 <= t0:
        return 0.0
    return sum(n for r in runs for stamp, n in r["chunks"] if t0 <= stamp <= t1) / ((t1 - t0) / 1e9)


def side_by_side(
    urls: list[str], streams: int, workers: int | None, ray: str | None, duration_s: float, tokens: int
) -> dict:
    """One row: a run per sim, at once (each in its own process), the streams and workers split over them."""
    k = len(urls)
    parts = [streams // k + (i < streams % k) for i in range(k)]
    each = None if workers is None else workers // k
    if k == 1:
        runs = [row(urls[0], streams, workers, ray, duration_s, tokens)]
    else:
        start_ns = time.perf_counter_ns() + SIDE_BY_SIDE_LEAD_NS  # the processes import servelab meanwhile
        with ProcessPoolExecutor(k, mp_context=multiprocessing.get_context("spawn")) as pool:
            futures = [
                pool.submit(row, url, n, each, ray, duration_s, tokens, start_ns)
                for url, n in zip(urls, parts, strict=True)
            ]
            runs = [f.result() for f in futures]
    errors = [e for r in runs for e in r["stamp_errors_ms"]]
    clocks = [r["clock_ms"] for r in runs if r["clock_ms"] is not None]
    mode = "1 process" if workers is None else f"{'ray' if ray else 'local'} x{each}"
    return {
        "mode": mode if k == 1 else f"{k}x {mode}",
        "sims": k,  # "2x local x1": 2 runs of 1 worker each
        "streams": streams,
        "events_s": runs[0]["events_s"] if k == 1 else together_events_s(runs),
        "err_p50_ms": percentile(errors, 50),
        "err_p99_ms": percentile(errors, 99),
        "clock_ms": max(clocks) if clocks else None,
        "valid": all(r["valid"] for r in runs),
        "requests": sum(r["requests"] for r in runs),
        "errors": sum(r["errors"] for r in runs),
    }


def print_row(r: dict) -> None:
    clock = "-" if r["clock_ms"] is None else f"±{r['clock_ms']:.3f}"
    print(
        f"{r['mode']:>14} {r['sims']:>4} {r['streams']:>7} {r['events_s']:>10,.0f} {r['err_p50_ms']:>9.3f} "
        f"{r['err_p99_ms']:>9.3f} {clock:>8} {r['requests']:>6} {r['errors']:>4} {'yes' if r['valid'] else 'NO':>5}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", default="50,100,200")
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--duration", type=float, default=3.0)
    parser.add_argument("--itl-ms", type=float, default=5.0)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--sims", default="1", help="sims side by side, e.g. 1,2 (one bench run per sim)")
    parser.add_argument(
        "--ray", action="store_true", help="also through a local Ray (ray.init on this machine)"
    )
    args = parser.parse_args()
    streams = [int(x) for x in args.streams.split(",")]
    counts = [int(x) for x in args.workers.split(",")]
    modes: list[tuple[int | None, str | None]] = [(None, None), *((n, None) for n in counts)]
    if args.ray:
        modes += [(n, "local") for n in counts]
    print(
        f"{os.cpu_count()} CPUs; sim ITL {args.itl_ms:g} ms, 1 token per chunk, {args.tokens} tokens per request, "
        f"{args.duration:g} s per level"
    )
    print(
        f"{'mode':>14} {'sims':>4} {'streams':>7} {'events/s':>10} {'err p50':>9} {'err p99':>9} {'clock':>8} "
        f"{'reqs':>6} {'errs':>4} {'valid':>5}"
    )
    for k in (int(x) for x in args.sims.split(",")):
        with sims(args.itl_ms, k) as urls:
            for count in streams:
                for workers, ray in modes:
                    if workers is not None and workers % k:
                        print(
                            f"{'':>14} {k:>4} {count:>7}  ({workers} worker(s) cannot be split over {k} sims)"
                        )
                        continue
                    print_row(side_by_side(urls, count, workers, ray, args.duration, args.tokens))


if __name__ == "__main__":
    main()

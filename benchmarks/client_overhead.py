"""How much the bench client costs, measured against `servelab sim` on loopback.

1. Events/s on one core: N concurrent streams of 1-token chunks (one SSE event each) every 5 ms, offered
   5,000 to 100,000 events/s; the client is pinned to CPU 0, the sim to CPU 1. Timing error = the client's
   stamp of chunk j − when the sim wrote chunk j (the sim's /sim/requests log; both CLOCK_MONOTONIC on one
   host). Events/s and errors are taken over the steady window, while every stream is streaming. "sim late
   p99" is how late the sim wrote its chunks against their schedule (whether the sim, not the client, fell
   behind). Two shapes: STAGGERED, each stream starting at its own phase of a request's length (a level that
   has run for a while: requests end and begin at a steady rate; the headline), and TOGETHER, every stream
   starting at once with equal lengths, so all requests end and begin in the same few tens of ms each round
   (a burst of request set-up, ~150 us of client CPU each). The goal: >= 50,000 events/s with p99 < 1 ms.
   The headline is the highest rung that passed in any pass; a second line judges each rung on its median p99
   over the passes (one host pause then cannot pass or fail it alone).
   Before the ladder, a busy loop on each CPU shows how often the host (a VM's hypervisor) takes the CPU
   away: events arriving in such a pause are late by the rest of it whatever the client does.
2. Memory per 1,000 concurrent streams: client RSS with 1,000 open streams minus RSS before (goal <= 150 MB).
3. GuideLLM and AIPerf, when installed (on PATH or in $SERVELAB_TOOLS_VENV/bin; this script installs nothing):
   each runs against the same sim and workload as our client at 50/150/250 streams, and their own figures are
   printed beside ours with the sim's truth (benchmarks/third_party.py).

    python benchmarks/client_overhead.py [--quick] [--passes 3]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import third_party  # benchmarks/ (this script's own directory) is on sys.path

from servelab.bench.client import ClientRequest, StreamClient
from servelab.bench.metrics import percentile
from servelab.bench.monitor import LoopMonitor

ROOT = Path(__file__).resolve().parents[1]  # the sim subprocess imports servelab from here, whatever the cwd


@contextlib.contextmanager
def sim(*args: str, cpu: int | None = 1):
    cmd = [sys.executable, "-c", "import sys; from servelab.cli.app import main; sys.exit(main())", "sim"]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    proc = subprocess.Popen(
        [*cmd, "--port", "0", "--json", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    try:
        url = json.loads(proc.stdout.readline())["url"]
        if cpu is not None and cpu < (os.cpu_count() or 1):
            os.sched_setaffinity(proc.pid, {cpu})
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def body(tokens: int) -> dict:
    return {
        "model": "sim-model",
        "messages": [{"role": "user", "content": "x"}],
        "max_tokens": tokens,
        "stream": True,
        "ignore_eos": True,
    }


async def streams(
    url: str, count: int, tokens: int, rounds: int, stagger_s: float = 0.0
) -> tuple[list, dict, float]:
    """``count`` closed-loop streams, ``rounds`` requests each, stream w starting ``w/count * stagger_s`` late;
    (records, client stats, wall seconds)."""
    monitor = LoopMonitor()
    async with StreamClient(url) as client:
        monitor.start()
        t0 = time.perf_counter()

        async def worker(w: int) -> list:
            await asyncio.sleep(stagger_s * w / count)
            out = []
            for r in range(rounds):
                req = ClientRequest(path="/v1/chat/completions", body=body(tokens), request_index=w, serial=r)
                out.append(await client.send(req))
            return out

        results = await asyncio.gather(*(worker(w) for w in range(count)))
        wall = time.perf_counter() - t0
        stats = await monitor.stop()
    return [r for rs in results for r in rs], stats, wall


def steady_window(records: list) -> tuple[int, int]:
    """(ns, ns) during which every stream was streaming: from the last stream's first event to the first
    stream's last event. Rates and timing errors are taken inside it, so ramp-up and tail do not count."""
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for r in records:
        if len(r.chunk_ns):
            first[r.request_index] = min(first.get(r.request_index, r.chunk_ns[0]), r.chunk_ns[0])
            last[r.request_index] = max(last.get(r.request_index, r.chunk_ns[-1]), r.chunk_ns[-1])
    return max(first.values()), min(last.values())


def timing_errors(url: str, records: list, ttft_ms: float, itl_ms: float, window: tuple[int, int]):
    """Inside ``window``: (client stamp − sim write per event in ms, events, sim write − its deadline in ms:
    did the sim keep up)."""
    with urllib.request.urlopen(url + "/sim/requests", timeout=30) as response:
        log = json.loads(response.read())
    errors, events, sim_late = [], 0, []
    lo, hi = window
    for r in records:
        entry = log.get(r.request_id, {})
        t0 = entry.get("t0_ns", 0)
        for j, (c, w) in enumerate(zip(r.chunk_ns, entry.get("chunks_ns", []), strict=False)):
            if lo <= c <= hi:
                events += 1
                errors.append((c - w) / 1e6)
                sim_late.append((w - t0) / 1e6 - ttft_ms - j * itl_ms)
    return errors, events, sim_late


def rate_row(count: int, itl_ms: float, tokens: int, rounds: int, staggered: bool = True) -> dict:
    """One rung: ``count`` streams, each starting at its own phase of a request's length (``staggered``: a
    level that has run a while, requests ending and beginning at a steady rate), or all at once (each
    round's requests then end and begin together: a burst of request work every round)."""
    with sim("--ttft-ms", "5", "--itl-ms", str(itl_ms)) as url:
        stagger_s = (5 + tokens * itl_ms) / 1000 if staggered else 0.0
        records, stats, _ = uvloop_run(streams(url, count, tokens, rounds, stagger_s))
        window = steady_window(records)
        errors, events, sim_late = timing_errors(url, records, 5.0, itl_ms, window)
    failed = sum(r.status != "ok" for r in records)
    window_s = (window[1] - window[0]) / 1e9
    return {
        "streams": count,
        "offered_ev_s": count * 1000 / itl_ms,
        "achieved_ev_s": events / window_s,
        "cpu": stats["cpu_fraction"],
        "err_p50_ms": percentile(errors, 50),
        "err_p99_ms": percentile(errors, 99),
        "err_max_ms": max(errors) if errors else None,
        "sim_late_p99_ms": percentile(sim_late, 99),
        "failed": failed,
    }


def memory_row(count: int) -> dict:
    process = psutil.Process()
    with sim("--ttft-ms", "5", "--itl-ms", "100") as url:
        before = process.memory_info().rss

        async def measure() -> int:
            task = asyncio.ensure_future(streams(url, count, 60, 1))
            await asyncio.sleep(4.0)  # all streams open and half-way through
            peak = process.memory_info().rss
            records, _, _ = await task
            assert sum(r.status == "ok" for r in records) == count, "streams failed"
            return peak

        peak = uvloop_run(measure())
    return {
        "streams": count,
        "rss_before_mb": before / 2**20,
        "rss_during_mb": peak / 2**20,
        "per_1000_streams_mb": (peak - before) / 2**20 * 1000 / count,
    }


PAUSE_PROBE = """import os, sys, time
os.sched_setaffinity(0, {int(sys.argv[1])})
end = time.perf_counter_ns() + int(float(sys.argv[2]) * 1e9)
last, gaps = time.perf_counter_ns(), []
while last < end:
    now = time.perf_counter_ns()
    if now - last > 200_000:
        gaps.append(now - last)
    last = now
print(len(gaps), sum(gaps), max(gaps, default=0))
"""


def host_pauses(seconds: float = 5.0) -> list[tuple[int, int, float, float]]:
    """A busy loop on each CPU at once, nothing else running: how often the host took the CPU away for more
    than 0.2 ms. Any event that arrives during such a pause is stamped late by the rest of it, whatever the
    client does; this is the floor of the timing error on this machine. (cpu, pauses, total ms, largest ms)."""
    cpus = range(min(2, os.cpu_count() or 1))
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", PAUSE_PROBE, str(cpu), str(seconds)], stdout=subprocess.PIPE, text=True
        )
        for cpu in cpus
    ]
    rows = []
    for cpu, proc in zip(cpus, procs, strict=True):
        count, total_ns, largest_ns = (int(x) for x in proc.communicate()[0].split())
        rows.append((cpu, count, total_ns / 1e6, largest_ns / 1e6))
    return rows


def uvloop_run(coro):
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)


HEADER = (
    f"{'streams':>7} {'offered ev/s':>12} {'achieved ev/s':>13} {'client CPU':>10} {'err p50 ms':>10} "
    f"{'err p99 ms':>10} {'err max ms':>10} {'sim late p99':>12} {'failed':>6}"
)


def print_row(row: dict) -> None:
    print(
        f"{row['streams']:>7} {row['offered_ev_s']:>12.0f} {row['achieved_ev_s']:>13.0f} {row['cpu']:>10.0%} "
        f"{row['err_p50_ms']:>10.3f} {row['err_p99_ms']:>10.3f} {row['err_max_ms']:>10.3f} "
        f"{row['sim_late_p99_ms']:>12.3f} {row['failed']:>6}",
        flush=True,
    )


def ladder_rows(ladder: tuple[int, ...], itl_ms: float, staggered: bool) -> list[dict]:
    """Run the ladder once, printing each row as it comes."""
    print(HEADER, flush=True)
    rows = []
    for count in ladder:
        row = rate_row(
            count, itl_ms=itl_ms, tokens=int(1000 / itl_ms), rounds=4 if staggered else 3, staggered=staggered
        )
        print_row(row)
        rows.append(row)
    return rows


def row_passes(row: dict) -> bool:
    return row["err_p99_ms"] is not None and row["err_p99_ms"] < 1.0 and not row["failed"]


def best_rate(rows: list[dict]) -> float:
    """The highest achieved events/s among the rungs whose p99 timing error stayed under 1 ms."""
    return max((row["achieved_ev_s"] for row in rows if row_passes(row)), default=0.0)


def median_rate(passes_rows: list[list[dict]]) -> tuple[float, int]:
    """Judged over all passes at once, less at the mercy of one host pause: the highest rung whose MEDIAN
    p99 over the passes is under 1 ms, with its median achieved events/s; (0, 0) when none."""
    best = (0.0, 0)
    for rungs in zip(*passes_rows, strict=True):
        p99s = sorted(
            r["err_p99_ms"] if r["err_p99_ms"] is not None and not r["failed"] else float("inf")
            for r in rungs
        )
        if p99s[len(p99s) // 2] < 1.0:
            rates = sorted(r["achieved_ev_s"] for r in rungs)
            best = max(best, (rates[len(rates) // 2], rungs[0]["streams"]))
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps, one pass")
    parser.add_argument(
        "--passes",
        type=int,
        default=3,
        help="ladder passes; the headline is the best, the median p99 over passes is printed too (default 3)",
    )
    args = parser.parse_args()
    if (os.cpu_count() or 1) > 1:
        os.sched_setaffinity(0, {0})
    mem = memory_row(1000)  # first: the ladder's rows would leave a grown heap that hides the streams' cost
    for cpu, count, total_ms, largest_ms in host_pauses():
        print(
            f"host pauses on CPU {cpu} (busy loop, 5 s, nothing else running): {count} over 0.2 ms, {total_ms:.1f} ms "
            f"in all, the largest {largest_ms:.2f} ms"
        )
    ladder = (
        (100, 300) if args.quick else (25, 50, 100, 150, 200, 225, 250, 260, 275, 300, 350, 400, 450, 500)
    )
    passes_n = 1 if args.quick else max(1, args.passes)
    staggered = []
    for n in range(passes_n):
        print(
            f"STAGGERED pass {n + 1}/{passes_n} (load average {os.getloadavg()[0]:.2f}); 1-token events every 5 ms"
        )
        staggered.append(ladder_rows(ladder, itl_ms=5.0, staggered=True))
    print(
        f"TOGETHER (load average {os.getloadavg()[0]:.2f}): every stream starts at once, 3 rounds of equal requests"
    )
    together = best_rate(ladder_rows(ladder, itl_ms=5.0, staggered=False))
    bests = [best_rate(rows) for rows in staggered]
    spread = ", ".join(f"{b:.0f}" for b in bests)
    print(
        f"highest events/s on one core with p99 timing error < 1 ms: {max(bests):.0f} staggered (best of {passes_n}: "
        f"{spread}); {together:.0f} with every stream starting together; goal >= 50,000"
    )
    if passes_n > 1:
        rate, streams = median_rate(staggered)
        print(
            f"judged on the median p99 over the {passes_n} staggered passes: {rate:.0f} events/s ({streams} streams)"
        )
    print(
        f"memory: {mem['streams']} streams, RSS {mem['rss_before_mb']:.1f} -> {mem['rss_during_mb']:.1f} MB: "
        f"{mem['per_1000_streams_mb']:.1f} MB per 1,000 streams (goal <= 150 MB)"
    )
    compare_tools(args.quick)


def servelab_row(count: int, tokens: int, seconds: float) -> dict:
    """Our client in the tools' shape (all streams start together, ~``seconds`` of load), their columns.
    ITL here is our per-token gap (the tools report per-request means)."""
    with sim("--ttft-ms", "5", "--itl-ms", "5", "--eos-after", "50") as url:
        before = set(third_party.sim_log(url) or ())
        rounds = max(1, round(seconds / ((5 + tokens * 5) / 1000)))
        records, _, _ = uvloop_run(streams(url, count, tokens, rounds))
        window = steady_window(records)
        _, events, _ = timing_errors(url, records, 5.0, 5.0, window)
        ok = [r for r in records if r.status == "ok" and r.first_token_ns]
        wall_minus_mono = (
            time.time_ns() - time.monotonic_ns()
        )  # versus_sim takes wall-clock stamps, as the tools'
        truth = third_party.versus_sim(
            url, before, [(r.request_id, r.first_token_ns + wall_minus_mono) for r in ok]
        )
    ttft = [(r.first_token_ns - r.sent_ns) / 1e6 for r in ok]
    gaps = [(b - a) / 1e6 for r in ok for a, b in zip(r.chunk_ns, r.chunk_ns[1:], strict=False)]
    return {
        "tool": "servelab",
        "streams": count,
        "achieved_ev_s": events / ((window[1] - window[0]) / 1e9),
        "ttft_p50_ms": percentile(ttft, 50),
        "ttft_p99_ms": percentile(ttft, 99),
        "itl_p50_ms": percentile(gaps, 50),
        "itl_p99_ms": percentile(gaps, 99),
        "failed": len(records) - len(ok),
        **truth,
    }


def compare_tools(quick: bool) -> None:
    """GuideLLM and AIPerf, when installed (PATH or $SERVELAB_TOOLS_VENV/bin), against the same sim and
    workload, beside our client (benchmarks/third_party.py says exactly what runs and what each column is)."""
    tools = {name: exe for name, exe in third_party.find_tools().items() if exe}
    if not tools:
        print("guidellm, aiperf: not installed (PATH or $SERVELAB_TOOLS_VENV/bin): not compared")
        return
    runners = {"guidellm": third_party.run_guidellm, "aiperf": third_party.run_aiperf}
    print(
        f"beside {', '.join(tools)}: same sim (TTFT 5 ms, ITL 5 ms), 200-token answers, ~6 s of load, one core each"
    )
    print(" ".join(key.rjust(width) for key, width, _ in third_party.COLUMNS), flush=True)
    for count in (150,) if quick else (50, 150, 250):
        print(third_party.format_row(servelab_row(count, 200, 6.0)), flush=True)
        for name, exe in tools.items():
            with sim("--ttft-ms", "5", "--itl-ms", "5", "--eos-after", "50") as url:
                print(
                    third_party.format_row(
                        runners[name](exe, url, count, output_tokens=200, seconds=6, cpu=0)
                    ),
                    flush=True,
                )


if __name__ == "__main__":
    main()

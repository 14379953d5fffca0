"""Does `bench`'s live view disturb the client's stamps? The same level with the view on and off, taking turns.

Each try runs one closed-loop level (N streams of `--tokens` tokens every `--itl-ms` against `servelab sim`,
client on CPU 0, sim on CPU 1 where the machine has two) in a fresh process through the bench library;
"on" draws the terminal view (cli/live_view.py, rich Live at its 2 Hz, on a forced terminal writing to
/dev/null, so every frame is rendered), "off" gives the runner no progress callback. The client's own
figures of the level (bench/monitor.py: event-loop lag p99, timer wake-up lateness p99, CPU) and the TTFT
p50 error against the sim's known TTFT are printed per try and as medians.

    python benchmarks/live_view_ab.py [--streams 32] [--tries 4] [--itl-ms 5] [--tokens 200]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

TRY = """
import json, os, sys
sys.path.insert(0, sys.argv[1])
if len(os.sched_getaffinity(0)) > 1:
    os.sched_setaffinity(0, {0})
from rich.console import Console
from servelab.bench.config import BenchConfig
from servelab.bench.runner import run
from servelab.bench.schedule import StopRule
from servelab.bench.workloads import WorkloadSpec
from servelab.cli.live_view import LadderView
url, streams, tokens, view_on = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5] == "on"
config = BenchConfig(targets=(url,), concurrency=(streams,), stop=StopRule(requests=streams * 4), warmup=streams,
                     workload=WorkloadSpec("short", input_tokens=8, output_tokens=tokens))
view = LadderView(Console(file=open(os.devnull, "w"), force_terminal=True, width=160), config.lag_limit_ms)
try:
    result = run(config, None, progress=view.update if view_on else None)
finally:
    view.close()
level = result.targets[0].levels[0]
print(json.dumps({**level.client, "ttft_p50_ms": level.stats.ttft_ms.p50}))
"""


def start_sim(itl_ms: float, ttft_ms: float) -> tuple[subprocess.Popen, str]:
    code = (
        "import os, sys; len(os.sched_getaffinity(0)) > 1 and os.sched_setaffinity(0, {1}); "
        "from servelab.cli.app import main; sys.exit(main())"
    )
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            code,
            "sim",
            "--port",
            "0",
            "--json",
            "--itl-ms",
            str(itl_ms),
            "--ttft-ms",
            str(ttft_ms),
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    line = proc.stdout.readline() if proc.stdout else ""
    if not line:
        raise SystemExit("live_view_ab: servelab sim did not start")
    return proc, json.loads(line)["url"]


def one_try(url: str, streams: int, tokens: int, mode: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", TRY, str(ROOT), url, str(streams), str(tokens), mode],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"live_view_ab: a try failed: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=32)
    parser.add_argument("--tries", type=int, default=4)
    parser.add_argument("--itl-ms", type=float, default=5.0)
    parser.add_argument("--tokens", type=int, default=200)
    args = parser.parse_args()
    ttft_ms = 20.0
    sim, url = start_sim(args.itl_ms, ttft_ms)
    try:
        rows: dict[str, list[dict]] = {"off": [], "on": []}
        for _ in range(args.tries):
            for mode in rows:
                rows[mode].append(one_try(url, args.streams, args.tokens, mode))
    finally:
        sim.terminate()
        sim.wait(timeout=10)
    keys = (
        ("lag_p99_ms", "loop lag p99 ms"),
        ("wake_late_p99_ms", "wake late p99 ms"),
        ("cpu_fraction", "client CPU"),
    )
    print(
        f"{args.streams} streams × {args.tokens} tokens every {args.itl_ms:g} ms, {args.tries} tries each, "
        f"sim TTFT {ttft_ms:g} ms"
    )
    print(f"{'view':>4} {'figure':>18} {'each try':>36} {'median':>8}")
    for mode, tries in rows.items():
        for key, name in keys:
            values = [t[key] for t in tries if t.get(key) is not None]
            each = " ".join(f"{v:.3f}" for v in values)
            print(f"{mode:>4} {name:>18} {each:>36} {statistics.median(values):>8.3f}")
        errors = [t["ttft_p50_ms"] - ttft_ms for t in tries if t.get("ttft_p50_ms") is not None]
        print(
            f"{mode:>4} {'TTFT p50 error ms':>18} {' '.join(f'{e:.3f}' for e in errors):>36} "
            f"{statistics.median(errors):>8.3f}"
        )


if __name__ == "__main__":
    main()

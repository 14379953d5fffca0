"""How fast `servelab advise` searches: candidates, how many the analytic screen left out, how many were emulated,
wall and CPU seconds, and per candidate.

    PYTHONPATH=TREE python benchmarks/advise_speed.py [--only NAME] [--jobs 2] [--no-baseline]

(without PYTHONPATH: this checkout). Each row is one `servelab advise … --json` in a child process (its CPU time
from `os.wait4`, so other jobs on a shared machine do not count); the goal (issue 24 item 5) is >= 500
candidates in <= 30 s on one core. Rows marked `no screen` run the same search with `--no-screen` (every fitting
candidate emulated), to show what the screen saves; rows with `jobs` spread the emulations over local processes.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

if "PYTHONPATH" not in os.environ:  # else the tree it names (e.g. the code before a change)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

CLI = [sys.executable, "-c", "import sys; from servelab.cli.app import main; sys.exit(main())"]
FIELD_REPORT = [
    "Qwen/Qwen3.5-27B",
    "--gpu",
    "rtx4090-48g",
    "--gpus",
    "2",
    "--interconnect",
    "pcie-host-staged",
]
SEARCHES = {
    # the field report's machine and its second goal: 16 users of mixed requests, TTFT p99 <= 5 s
    "27b-2gpu-16users": [*FIELD_REPORT, "--users", "16", "--workload", "mixed", "--slo", "ttft_p99_ms=5000"],
    # one user at the lowest TPOT there
    "27b-2gpu-1user": [*FIELD_REPORT, "--users", "1", "--slo", "tpot_p99_ms=200,ttft_p99_ms=5000"],
    # eight GPUs, engine variants on top of the grid: more than 500 candidates
    "27b-8gpu-variants": [
        "Qwen/Qwen3.5-27B",
        "--gpu",
        "rtx4090-48g",
        "--gpus",
        "8",
        "--users",
        "32",
        "--price",
        "0.7",
        "--slo",
        "ttft_p99_ms=3000,tpot_p99_ms=100",
        "--variant",
        "llamacpp --kv-unified",
        "--variant",
        "vllm --max-num-batched-tokens 2048",
        "--variant",
        "sglang --chunked-prefill-size 2048",
    ],
}


def run(args: list[str]) -> dict[str, float]:
    """One advise in a child: its JSON's counts, wall seconds and the child's CPU seconds."""
    started = time.perf_counter()
    proc = subprocess.Popen(
        [*CLI, "advise", *args, "--json"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    out = proc.stdout.read() if proc.stdout else b""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"advise {' '.join(args)} failed (exit {os.waitstatus_to_exitcode(status)})")
    data = json.loads(out)
    fitting = len(data["ranked"]) + len(data["missed"]) + len(data["screened"])
    return {
        "candidates": data["candidates"],
        "fitting": fitting,
        "screened": len(data["screened"]),
        "emulated": data["emulated"],
        "twins": fitting - len(data["screened"]) - data["emulated"],
        "wall_s": wall,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "front": len(data["front"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=sorted(SEARCHES), help="One search only.")
    parser.add_argument("--jobs", type=int, default=2, help="Processes for the spread rows (1: none).")
    parser.add_argument("--no-baseline", action="store_true", help="Skip the --no-screen rows.")
    args = parser.parse_args()
    rows = []
    for name, search in SEARCHES.items():
        if args.only and name != args.only:
            continue
        variants: list[tuple[str, list[str]]] = [("screen", [])]
        if not args.no_baseline:
            variants.append(("no screen", ["--no-screen"]))
        if args.jobs > 1:
            variants.append((f"jobs {args.jobs}", ["--jobs", str(args.jobs)]))
        for how, extra in variants:
            rows.append((name, how, run([*search, *extra])))
    head = (
        "search",
        "how",
        "candidates",
        "screened out",
        "twins",
        "emulated",
        "wall s",
        "CPU s",
        "CPU ms/candidate",
    )
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for name, how, r in rows:
        per = 1000 * r["cpu_s"] / r["candidates"]
        print(
            f"| {name} | {how} | {r['candidates']} | {r['screened']} | {r['twins']} | {r['emulated']} | {r['wall_s']:.1f} |"
            f" {r['cpu_s']:.1f} | {per:.0f} |"
        )


if __name__ == "__main__":
    main()

"""The bench client at another git revision against this working tree, on the same rungs, alternating.

One host's noise (a VM's pauses, neighbours) moves client_overhead.py's figures from run to run more than a
small change to the client does; taking turns, rung by rung, puts both versions under the same conditions.
Each try is one staggered rung of client_overhead.py (N streams of 1-token events every 5 ms against
`servelab sim`, client on CPU 0, sim on CPU 1), run in a fresh process with that version's servelab first on
sys.path (the sim too). The other version is checked out with `git worktree` into a temp dir, removed after.
Client CPU is the cleanest signal of per-event cost; p99 shows whether the timing goal held.

    python benchmarks/client_ab.py REV [--streams 250,400] [--tries 4]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

RUNG = """
import json, os, sys
sys.path.insert(0, os.path.join(sys.argv[1], "benchmarks"))
import client_overhead as co
os.sched_setaffinity(0, {0})
row = co.rate_row(int(sys.argv[2]), itl_ms=5.0, tokens=200, rounds=4, staggered=True)
print(json.dumps({k: row[k] for k in ("achieved_ev_s", "cpu", "err_p99_ms", "failed")}))
"""


def rung(root: Path, streams: int) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", RUNG, str(root), str(streams)],
        capture_output=True,
        text=True,
        cwd=root,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"client_ab: the rung at {root} failed: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rev", help="the git revision to compare with (e.g. HEAD~3)")
    parser.add_argument("--streams", default="250,400", help="rungs, comma-separated (default 250,400)")
    parser.add_argument("--tries", type=int, default=4, help="tries per version and rung (default 4)")
    args = parser.parse_args()
    streams = [int(s) for s in args.streams.split(",")]
    with tempfile.TemporaryDirectory(prefix="servelab-ab-") as tmp:
        other = Path(tmp) / "other"
        added = subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(other), args.rev],
            capture_output=True,
            text=True,
            check=False,
        )
        if added.returncode != 0:
            raise SystemExit(f"client_ab: cannot check out {args.rev!r}: {added.stderr.strip()}")
        try:
            versions = {args.rev: other, "working tree": ROOT}
            print(
                f"{'streams':>7} {'version':>14} {'client CPU (each try)':>32} {'mean':>6} {'p99 < 1 ms':>10}"
            )
            for n in streams:
                rows: dict[str, list[dict]] = {name: [] for name in versions}
                for _ in range(args.tries):
                    for name, root in versions.items():
                        rows[name].append(rung(root, n))
                for name, tries in rows.items():
                    cpus = " ".join(f"{t['cpu']:.0%}" for t in tries)
                    ok = sum(
                        t["err_p99_ms"] is not None and t["err_p99_ms"] < 1.0 and not t["failed"]
                        for t in tries
                    )
                    mean = statistics.fmean(t["cpu"] for t in tries)
                    print(f"{n:>7} {name[:14]:>14} {cpus:>32} {mean:>6.1%} {ok:>6}/{len(tries)}", flush=True)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(other)], check=False)


if __name__ == "__main__":
    main()

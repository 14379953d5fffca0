"""What a gzip bomb and a keep-alive drip cost `servelab bench`: its peak RSS and when the drip ends.

    PYTHONPATH=TREE python benchmarks/bench_bombs.py [--bomb-gib 2] [--concurrency 3] [--deadline 5]

(without PYTHONPATH: this checkout). A raw loopback server (tests/answer_server.py) answers every request
with a gzip-encoded SSE stream that inflates to --bomb-gib GiB (about 2 MiB on the wire), then with an answer
that sends one event and `: keep-alive` comments every 20 ms for hours. `bench` runs in a child process;
its peak RSS is the child's own ``ru_maxrss`` (os.wait4). Goal (issue 26): <= 200 MB against the 2 GiB bomb,
and the drip's requests end at --deadline.

Measured on a shared 2-vCPU VM (c=3, 2 GiB bomb, --deadline 5): see docs/metrics.md, "Limits". Before (main
at 68c54d3, which inflated): 590 MB against a 0.5 GiB bomb at c=1 (not run at 2 GiB on a shared machine: the
second campaign saw 3.1 GB at c=3).
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

if "PYTHONPATH" not in os.environ:  # else the tree it names (e.g. the code before a change)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import servelab
from tests.answer_server import answer_server, sse_head

TREE = Path(servelab.__file__).resolve().parents[1]
CLI = [sys.executable, "-c", "import sys; from servelab.cli.app import main; sys.exit(main())"]
EVENT = b'data: {"choices":[{"index":0,"delta":{"content":"a"}}]}\n\n'


def gzip_bomb(inflated_bytes: int) -> bytes:
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = EVENT * ((4 << 20) // len(EVENT))
    parts = [compressor.compress(block) for _ in range(inflated_bytes // len(block))]
    return b"".join(parts) + compressor.flush()


def run_bench(url: str, db: Path, concurrency: int, *extra: str) -> tuple[int, float, float]:
    """(exit code, peak RSS in MB, seconds) of one `bench` in a child process."""
    args = [
        "bench",
        url,
        "--db",
        str(db),
        "--concurrency",
        str(concurrency),
        "--requests",
        str(concurrency),
        "--warmup",
        "0",
        "--no-power",
        "--json",
        *extra,
    ]
    started = time.monotonic()
    child = subprocess.Popen(
        [*CLI, *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(TREE)},
    )
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    return child.returncode, usage.ru_maxrss / 1024, time.monotonic() - started


def kinds(db: Path) -> str:
    with sqlite3.connect(db) as c:
        rows = c.execute(
            "SELECT error_kind, count(*), max(end_ns - sent_ns) FROM requests GROUP BY 1"
        ).fetchall()
    return ", ".join(f"{k or 'ok'}: {n} (longest {longest / 1e9:.2f} s)" for k, n, longest in rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bomb-gib", type=float, default=2.0)
    parser.add_argument("--concurrency", type=int, default=3)
    parser.add_argument("--deadline", type=float, default=5.0)
    args = parser.parse_args()
    built = time.monotonic()
    bomb = gzip_bomb(int(args.bomb_gib * (1 << 30)))
    print(
        f"bomb: {len(bomb) / 1e6:.1f} MB on the wire, {args.bomb_gib:g} GiB inflated "
        f"(built in {time.monotonic() - built:.1f} s); bench from {TREE}"
    )

    def drip(serial: int, path: str):
        yield sse_head()
        yield b'data: {"choices":[{"index":0,"delta":{"role":"assistant"}}]}\n\n'
        for _ in range(10**6):
            yield b": keep-alive\n\n"

    print(f"{'case':<26} {'exit':>4} {'peak RSS MB':>12} {'wall s':>7}  records")
    with tempfile.TemporaryDirectory() as folder:
        with answer_server(lambda serial, path: [sse_head(b"Content-Encoding: gzip\r\n"), bomb]) as server:
            db = Path(folder) / "bomb.db"
            code, rss, wall = run_bench(server.url, db, args.concurrency)
            print(f"{f'gzip bomb c={args.concurrency}':<26} {code:>4} {rss:>12.0f} {wall:>7.1f}  {kinds(db)}")
        with answer_server(drip, pause_s=0.02) as server:
            db = Path(folder) / "drip.db"
            code, rss, wall = run_bench(server.url, db, args.concurrency, "--deadline", f"{args.deadline:g}")
            label = f"keep-alive drip {args.deadline:g} s"
            print(f"{label:<26} {code:>4} {rss:>12.0f} {wall:>7.1f}  {kinds(db)}")


if __name__ == "__main__":
    main()

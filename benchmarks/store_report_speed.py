"""How fast the result store takes records and how long the bill takes to render, on this machine.

    python benchmarks/store_report_speed.py [--records N]

Prints a table: records/s for one transaction per record (`add_request`) and for batches of 64
(`add_requests`, what the bench's sink does), the database bytes per record (128 chunks each), the time
to load the run back, and the time to render HTML (with its 7 plots) and Markdown.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from servelab.report import assemble, render_report
from servelab.store import Store
from tests.runs_factory import make_record


def records(n: int, level: str) -> list:
    return [
        make_record(0, level, i, start_ns=i * 1_000_000, ttft_ms=20, itl_ms=5, output_tokens=128)
        for i in range(n)
    ]


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=2000)
    n = parser.parse_args().records
    rows = []
    with tempfile.TemporaryDirectory() as tmp, Store.open(Path(tmp) / "runs.db") as store:
        run_id = store.create_run({"name": "speed"})
        store.add_target(run_id, 0, "http://127.0.0.1:1", "llamacpp", {"model": "m"})
        singles, batched = records(n, "c=1"), records(n, "c=8")
        s = timed(lambda: [store.add_request(run_id, r) for r in singles])
        rows.append(("add_request (1 txn/record)", f"{n / s:,.0f} records/s"))
        s = timed(lambda: [store.add_requests(run_id, batched[i : i + 64]) for i in range(0, n, 64)])
        rows.append(("add_requests (64/txn)", f"{n / s:,.0f} records/s"))
        store.finish_run(run_id, partial=False)
        size = sum(p.stat().st_size for p in Path(tmp).glob("runs.db*"))
        rows.append(("database size", f"{size / (2 * n):,.0f} bytes/record (128 chunks)"))
        loaded = []
        s = timed(lambda: loaded.append(store.load_run(run_id)))
        rows.append((f"load_run ({2 * n} records)", f"{s * 1e3:,.0f} ms"))
        bill = assemble(loaded)
        rows.append(("render HTML (7 plots)", f"{timed(lambda: render_report(bill, 'html')) * 1e3:,.0f} ms"))
        rows.append(("render Markdown (tables)", f"{timed(lambda: render_report(bill, 'md')) * 1e3:,.0f} ms"))
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")


if __name__ == "__main__":
    main()

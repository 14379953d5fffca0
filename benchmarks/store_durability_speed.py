"""What making each finished request durable costs, each way, on this machine.

    python benchmarks/store_durability_speed.py [--records N]

Prints a table of records/s and µs per record (128 chunks each) for: a journal line per record (encode +
one unbuffered write: what the bench's event loop pays), the same with fsync per line, one SQLite
transaction per record (WAL, synchronous=NORMAL: "commit each record as it completes"), and the
writer thread's batches of up to 1000 (how fast it catches up after the store was locked).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from servelab.store import Store, codec
from servelab.store.journal import Journal
from tests.runs_factory import make_record


def timed(n: int, step: Callable[[int], None]) -> float:
    start = time.perf_counter()
    for i in range(n):
        step(i)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=3000)
    n = parser.parse_args().records
    records = [
        make_record(0, "c=1", i, start_ns=i * 1_000_000, ttft_ms=20, itl_ms=5, output_tokens=128)
        for i in range(n)
    ]
    rows: list[tuple[str, float]] = []
    with tempfile.TemporaryDirectory() as tmp, Store.open(Path(tmp) / "runs.db") as store:
        run_id = store.create_run({"name": "speed"})
        store.add_target(run_id, 0, "http://127.0.0.1:9/v1", "sim", {})
        journal = Journal(Path(tmp) / "a.jsonl")
        rows.append(
            (
                "journal line (encode + write)",
                timed(n, lambda i: journal.append(codec.record_to_row(run_id, records[i]))),
            )
        )
        synced = Journal(Path(tmp) / "b.jsonl")

        def append_fsync(i: int) -> None:
            synced.append(codec.record_to_row(run_id, records[i]))
            os.fsync(synced._file.fileno())

        rows.append(("journal line + fsync", timed(n, append_fsync)))
        rows.append(
            (
                "SQLite commit per record",
                timed(n, lambda i: store.add_rows([codec.record_to_row(run_id, records[i])])),
            )
        )
        batches = [records[i : i + 1000] for i in range(0, n, 1000)]
        start = time.perf_counter()
        for batch in batches:
            store.add_rows([codec.record_to_row(run_id, r) for r in batch])
        rows.append(("SQLite batches of 1000 (writer catching up)", time.perf_counter() - start))
        journal.close(remove=True)
        synced.close(remove=True)
    print(f"{'way':<46} {'records/s':>10} {'µs/record':>10}")
    for name, seconds in rows:
        print(f"{name:<46} {n / seconds:>10,.0f} {seconds / n * 1e6:>10.1f}")


if __name__ == "__main__":
    main()

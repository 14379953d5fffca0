"""The SQLite result store: runs, targets, levels, per-request records, time series, /metrics snapshots.

from servelab.store import Store
with Store.open(path) as store:
    run_id = store.create_run(RunMeta(name=..., workload=RunWorkload(kind="short"), ...))
    store.add_target(run_id, 0, url, "llamacpp", TargetInfo(model=...))
    store.add_request(run_id, record)          # one transaction each: a crash loses nothing finished
    store.add_level(run_id, 0, 0, level_summary)   # target 0, repeat 0, a `LevelSummary`
    store.finish_run(run_id, partial=False)

The run document's types (`results/run.py`, `results/stats.py`) go in and come back; JSON exists only
between the store and SQLite (`store.py` writes `to_json()`, `reader.py` reads `from_json`).
"""

from servelab.store.models import MetricsSnapshot, RunInfo, StoredLevel, StoredRun, StoredTarget
from servelab.store.store import Store

__all__ = ["MetricsSnapshot", "RunInfo", "Store", "StoredLevel", "StoredRun", "StoredTarget"]

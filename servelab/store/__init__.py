"""The SQLite result store: runs, targets, levels, per-request records, time series, /metrics snapshots.

from servelab.store import Store
with Store.open(path) as store:
    run_id = store.create_run({"name": ..., "workload": {...}, ...})
    store.add_target(run_id, 0, url, "llamacpp", info)
    store.add_request(run_id, record)          # one transaction each: a crash loses nothing finished
    store.add_level(run_id, 0, "c=4", 0, summary)
    store.finish_run(run_id, partial=False)
"""

from servelab.store.models import MetricsSnapshot, RunInfo, StoredLevel, StoredRun, StoredTarget
from servelab.store.store import Store

__all__ = ["MetricsSnapshot", "RunInfo", "Store", "StoredLevel", "StoredRun", "StoredTarget"]

"""Crash safety: a record stored before the writing process is SIGKILLed is still there; the run is partial."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from servelab.store import Store

WRITER = textwrap.dedent(
    """
    import sys, time
    from servelab.results.run import RunMeta, RunWorkload, TargetInfo
    from servelab.store import Store
    from tests.runs_factory import make_record

    store = Store.open(sys.argv[1])
    run_id = store.create_run(RunMeta(name="doomed", workload=RunWorkload(kind="short")))
    store.add_target(run_id, 0, "http://127.0.0.1:9/v1", "llamacpp", TargetInfo(model="m"))
    for i in range(3):
        store.add_request(run_id, make_record(0, "c=1", i, start_ns=i, ttft_ms=1, itl_ms=1, output_tokens=4))
    print(run_id, flush=True)
    time.sleep(60)  # killed here, mid-run, without closing anything
    """
)


def test_records_survive_sigkill_and_the_run_reads_back_partial(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(db)], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        run_id = proc.stdout.readline().strip()
        assert run_id, "the writer printed no run id"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL
    with Store.open(db) as store:
        run = store.load_run(run_id)
        (listed,) = store.list_runs()
    assert [r.request_index for r in run.requests] == [0, 1, 2]
    assert run.requests[2].output_tokens == 4
    assert run.info.partial is True and run.info.status == "interrupted"
    assert listed.partial is True and listed.status == "interrupted"

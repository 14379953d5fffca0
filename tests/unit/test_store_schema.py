"""Pins the JSON documents the store keeps (the SQLite tables are pinned in test_store_migrations.py): a key
added, renamed or dropped in `RunMeta`, `TargetInfo` or `LevelSummary` fails here and needs a migration
(store/migrations.py) and docs/results-schema.md."""

from __future__ import annotations

import json
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

from servelab.results.level_key import Level
from servelab.results.run import EdgeReport, Prediction, PredictTarget, RunMeta, RunWorkload, TargetInfo
from servelab.results.stats import LEVEL_KEYS, Distribution, LevelStats, LevelSummary, TokenCounts, Window
from servelab.store import Store

FIXTURE = Path(__file__).parents[1] / "fixtures" / "stores" / "before-typed.sqlite"
DOCS = (Path(__file__).parents[2] / "docs" / "results-schema.md").read_text()

RUN_META_KEYS = [
    "name",
    "servelab_version",
    "client_host",
    "workload",
    "settings",
    "targets",
    "client_edge",
    "wall_anchor_ns",
    "mono_anchor_ns",
    "predicted",
]
WORKLOAD_KEYS = ["kind", "input_tokens", "output_tokens", "seed", "chat"]
EDGE_KEYS = ["aiohttp_version", "body", "stall_timer", "missing"]
PREDICTION_KEYS = [
    "engine",
    "model",
    "gpu",
    "quant",
    "tensor_parallel",
    "interconnect",
    "plan_file",
    "engine_version",
    "effective",
    "speculation",
]
TARGET_INFO_KEYS = ["version", "model", "context_per_slot"]  # + "predicted": true for an emulated target

MEASURED = RunMeta(
    name="n",
    servelab_version="0.1.0",
    client_host="h",
    workload=RunWorkload(kind="short", input_tokens=8, output_tokens=4, seed=0, chat=True),
    settings={"concurrency": [1, 2], "slo": {"ttft_ms": 500.0}, "burstiness": 1.0},
    targets=("http://x/v1",),
    client_edge=EdgeReport("3.12.15", "protocol-callback", "servelab", ()),
    wall_anchor_ns=5,
    mono_anchor_ns=7,
)
PREDICTED = RunMeta(
    name=None,
    servelab_version="0.1.0",
    workload=RunWorkload(kind="long"),
    targets=("predict://vllm/h100",),
    predicted=Prediction(
        target=PredictTarget(engine="vllm", model="m", gpu="h100-sxm", quant="bf16", engine_version="0.10.1"),
        effective={"bandwidth_bytes_s": 3.0e12, "source": "plan"},
        speculation=None,
    ),
    wall_anchor_ns=5,
    mono_anchor_ns=0,
)
STATS = LevelStats(
    level=Level.open(2.5),
    requests=3,
    completed=2,
    errors=1,
    errors_by_kind={"http_5xx": 1},
    error_examples={"http_5xx": "boom"},
    ttft_ms=Distribution.of([1.0, 2.0]),
    tokens=TokenCounts(output=8),
    window=Window(0, 10**9, True),
    output_tok_s=8.0,
    duration_s=1.0,
    first_send_ns=3,
    lateness_ms=Distribution.of([0.5]),
    ttft_sched_ms=Distribution.of([1.5]),
    goodput_req_s=1.0,
    slo_attainment=0.5,
    ci95={"output_tok_s": (8.0, 1.0)},
    ramp_s=2.0,
    ramp_requests=1,
)
SUMMARY = LevelSummary(
    STATS,
    valid=False,
    invalid_reason="client lag",
    partial=True,
    client={"lag_p99_ms": 3.0},
    server={"counters": {"request_success": 2}},
    predicted={"source": "plan", "figures": {}},
)


def test_the_run_meta_keys_are_pinned_and_read_back() -> None:
    for meta in (MEASURED, PREDICTED):
        document = meta.to_json()
        assert list(document) == RUN_META_KEYS
        assert RunMeta.from_json(json.loads(json.dumps(document))) == meta
    assert list(MEASURED.to_json()["workload"]) == WORKLOAD_KEYS
    assert list(MEASURED.to_json()["client_edge"]) == EDGE_KEYS
    assert list(PREDICTED.to_json()["predicted"]) == PREDICTION_KEYS
    assert MEASURED.slo == {"ttft_ms": 500.0} and PREDICTED.slo == {} and PREDICTED.burstiness == 1.0


def test_the_target_info_keys_are_pinned_and_read_back() -> None:
    measured, predicted = (
        TargetInfo(version="b1", model="m", context_per_slot=4096),
        TargetInfo(predicted=True),
    )
    assert list(measured.to_json()) == TARGET_INFO_KEYS
    assert list(predicted.to_json()) == [*TARGET_INFO_KEYS, "predicted"]
    for info in (measured, predicted):
        assert TargetInfo.from_json(json.loads(json.dumps(info.to_json()))) == info


def test_the_level_summary_keys_are_pinned_and_read_back() -> None:
    document = SUMMARY.to_json()
    assert list(document) == [k for k in LEVEL_KEYS if k in document]
    assert set(LEVEL_KEYS) - set(document) == set()  # every key this summary can have, it has
    assert LevelSummary.from_json(json.loads(json.dumps(document))) == SUMMARY
    bare = LevelSummary(LevelStats(level=Level.closed(1))).to_json()  # the optional keys are left out
    optional = {
        "goodput_req_s",
        "slo_attainment",
        "lateness_ms",
        "ttft_sched_ms",
        "ramp",
        "server",
        "ci95",
        "predicted",
    }
    assert set(LEVEL_KEYS) - set(bare) == optional


def test_every_key_is_documented() -> None:
    keys = {*RUN_META_KEYS, *WORKLOAD_KEYS, *EDGE_KEYS, *PREDICTION_KEYS, *TARGET_INFO_KEYS, "predicted"}
    assert sorted(k for k in keys if f"`{k}`" not in DOCS) == []


def test_every_stored_row_of_the_old_store_reads_and_writes_back_the_same(tmp_path: Path) -> None:
    """After migration each row is exactly what today's types write: nothing a reader would have to guess."""
    path = tmp_path / "old.sqlite"
    shutil.copyfile(FIXTURE, path)
    Store.open(path).close()
    with closing(sqlite3.connect(path)) as db:
        metas = [json.loads(m) for (m,) in db.execute("SELECT meta FROM runs")]
        infos = [json.loads(i) for (i,) in db.execute("SELECT info FROM targets")]
        levels = [json.loads(s) for (s,) in db.execute("SELECT summary FROM levels")]
    assert len(metas) == 3 and len(infos) == 3 and len(levels) == 2 * 2 + 1 + 2
    assert [RunMeta.from_json(m).to_json() for m in metas] == metas
    assert [TargetInfo.from_json(i).to_json() for i in infos] == infos
    assert [LevelSummary.from_json(s).to_json() for s in levels] == levels

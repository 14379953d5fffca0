"""The result store's API against a real SQLite file: round trips, run ids, errors mapped to StoreError."""

from __future__ import annotations

import dataclasses
import sqlite3
from array import array
from pathlib import Path

import pytest

from servelab.errors import StoreError
from servelab.results.level_key import Level
from servelab.results.records import RequestRecord
from servelab.results.run import RunMeta
from servelab.results.stats import LevelStats, LevelSummary
from servelab.store import Store
from tests.runs_factory import make_record, store_run


def test_a_record_reads_back_field_for_field(tmp_path: Path) -> None:
    record = make_record(1, "c=4", 7, start_ns=123, ttft_ms=12.5, itl_ms=3.0, output_tokens=5, evicted=True)
    record = dataclasses.replace(
        record,
        server_timings={"cache_n": 3, "predicted_per_second": 41.5},
        chunk_tokens=array("i", [1, 2, 1, 0, 1]),
    )
    with Store.open(tmp_path / "r.db") as store:
        run_id = store.create_run(RunMeta(name="one"))
        store.add_request(run_id, record)
        (back,) = store.load_run(run_id).requests
    assert back == record
    assert back.chunk_ns.typecode == "q" and back.chunk_tokens.typecode == "i"


def test_chunk_arrays_are_stored_as_compact_blobs(tmp_path: Path) -> None:
    record = make_record(0, "c=1", 0, start_ns=0, ttft_ms=1, itl_ms=1, output_tokens=100)
    with Store.open(tmp_path / "r.db") as store:
        store.add_request(store.create_run(RunMeta()), record)
    (size,) = sqlite3.connect(tmp_path / "r.db").execute("SELECT length(chunk_ns) FROM requests").fetchone()
    assert size == 100 * 8


def test_a_whole_run_reads_back(tmp_path: Path) -> None:
    run_id = store_run(tmp_path / "r.db", engines=("llamacpp", "sglang"), ladder=(1, 2))
    with Store.open(tmp_path / "r.db") as store:
        store.add_samples(
            run_id, "gpu_power", [{"t_ns": 1, "gpu": 0, "power_w": 120.5}, {"t_ns": 2, "gpu": 0}]
        )
        store.add_metrics_snapshot(run_id, 0, "c=1", 0, "before", "vllm:num_requests_running 0\n", t_ns=5)
        run = store.load_run(run_id)
    assert [t.engine for t in run.targets] == ["llamacpp", "sglang"]
    assert run.targets[1].info.model == "tiny-test-model"
    assert [(lv.target_index, lv.level.label) for lv in run.levels] == [
        (0, "c=1"),
        (0, "c=2"),
        (1, "c=1"),
        (1, "c=2"),
    ]
    assert len(run.requests) == 2 * (3 + 6)
    assert run.samples["gpu_power"][0] == {"t_ns": 1, "gpu": 0, "power_w": 120.5}
    assert run.snapshots[0].text.startswith("vllm:num_requests_running")
    assert run.meta.workload is not None and run.meta.workload.kind == "short"
    assert run.info.status == "finished" and run.info.partial is False
    assert run.info.engines == ("llamacpp", "sglang") and run.info.request_count == 18


def test_run_ids_sort_by_time_and_a_prefix_finds_a_run(tmp_path: Path) -> None:
    first = store_run(tmp_path / "r.db", name="a")
    second = store_run(tmp_path / "r.db", name="b")
    with Store.open(tmp_path / "r.db") as store:
        assert [r.id for r in store.list_runs()] == [first, second]
        assert first <= second
        unique = next(second[:n] for n in range(1, len(second) + 1) if not first.startswith(second[:n]))
        assert store.load_run(unique).info.name == "b"
        assert store.resolve(second) == second


def test_unknown_and_ambiguous_ids_name_the_way_out(tmp_path: Path) -> None:
    store_run(tmp_path / "r.db")
    store_run(tmp_path / "r.db")
    with Store.open(tmp_path / "r.db") as store, pytest.raises(StoreError, match="servelab runs"):
        store.load_run("nope")
    with Store.open(tmp_path / "r.db") as store, pytest.raises(StoreError, match="ambiguous"):
        store.load_run("2")


def test_a_run_not_finished_is_partial_and_finish_records_the_outcome(tmp_path: Path) -> None:
    run_id = store_run(tmp_path / "r.db", finish=False)
    with Store.open(tmp_path / "r.db") as store:
        info = store.load_run(run_id).info
        assert info.partial is True and info.status == "running"  # this process wrote it and is alive
        store.finish_run(run_id, partial=True, summary={"stopped": "error budget"})
        run = store.load_run(run_id)
    assert run.info.partial is True and run.info.status == "finished"
    assert run.summary == {"stopped": "error budget"}


def test_credentials_never_reach_the_store(tmp_path: Path) -> None:
    with Store.open(tmp_path / "r.db") as store:
        run_id = store.create_run(RunMeta(name="x", settings={"max_tokens": 16, "prompt_tokens": 3}))
        with pytest.raises(StoreError, match=r"x-api-key.*credential"):
            store.add_level(
                run_id, 0, 0, LevelSummary(LevelStats(level=Level.closed(1)), client={"x-api-key": "s3cret"})
            )
        with pytest.raises(StoreError, match="'api_key'"):
            store.create_run(RunMeta(settings={"api_key": "sk-123"}))
    assert b"s3cret" not in (tmp_path / "r.db").read_bytes()


def test_fields_added_to_requestrecord_later_survive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    @dataclasses.dataclass(kw_only=True)
    class Newer(RequestRecord):
        queue_ns: int | None = None

    monkeypatch.setattr("servelab.store.codec.RequestRecord", Newer)
    record = Newer(
        target_index=0,
        level="c=1",
        repeat=0,
        request_index=0,
        phase="measure",
        status="ok",
        sent_ns=1,
        end_ns=2,
        queue_ns=42,
    )
    with Store.open(tmp_path / "r.db") as store:
        run_id = store.create_run(RunMeta())
        store.add_request(run_id, record)
        (back,) = store.load_run(run_id).requests
    assert back.queue_ns == 42


def test_sqlite_failures_become_store_errors(tmp_path: Path) -> None:
    not_a_db = tmp_path / "garbage.db"
    not_a_db.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreError, match=r"garbage\.db.*not a database"):
        Store.open(not_a_db)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(StoreError, match="cannot create the directory"):
        Store.open(blocker / "sub" / "r.db")
    with Store.open(tmp_path / "r.db") as store:
        with pytest.raises(StoreError, match="no run"):
            store.finish_run("missing", partial=False)
        with pytest.raises(StoreError, match="add request failed: FOREIGN KEY"):
            store.add_request(
                "missing", make_record(0, "c=1", 0, start_ns=0, ttft_ms=1, itl_ms=1, output_tokens=2)
            )
        run_id = store.create_run(RunMeta())  # the failed writes left no transaction open
        assert store.load_run(run_id).requests == ()


def test_ids_from_later_clock_readings_sort_later() -> None:
    from servelab.store.ids import new_run_id

    base = 1_796_065_023_000_000_000
    ids = [new_run_id(base + step * 1_000_000) for step in (0, 1, 999, 1000, 86_400_000)]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    assert ids[0].startswith("20261130T") and ids[0][15:19] == ".000"


def test_the_default_store_lives_in_the_data_directory(tmp_path: Path) -> None:
    from servelab import paths

    with Store.open() as store:
        run_id = store.create_run(RunMeta(name="default"))
    assert store.path == paths.default_db_path() and store.path.is_file()
    assert str(store.path).startswith(str(paths.data_dir()))  # isolated by tests/conftest.py
    with Store.open() as store:
        assert [r.id for r in store.list_runs()] == [run_id]

"""The bench client's two paths through aiohttp against `servelab sim`: with aiohttp's internals taken away
(aiohttp_edge falls back to the public reader) a run measures the sim's schedule as the fast path does,
gives the same records, and its meta says which path ran."""

from __future__ import annotations

import aiohttp
import pytest

from servelab.bench.config import BenchConfig
from servelab.bench.runner import run
from servelab.bench.schedule import StopRule
from servelab.bench.workloads import WorkloadSpec
from servelab.store import Store
from tests.bench_sim import sim_process

pytestmark = pytest.mark.timing  # wall-clock figures against the sim: run with no other test beside it

TTFT_MS, ITL_MS, OUT = 30.0, 10.0, 12
TOL_MS = 1.0


def _bench(url: str, store: Store, **kw) -> str:
    config = BenchConfig(
        targets=(url,),
        concurrency=kw.pop("levels", (1,)),
        workload=WorkloadSpec("short", 16, OUT),
        stop=StopRule(requests=kw.pop("requests", 8)),
        warmup=kw.pop("warmup", 1),
        **kw,
    )
    return run(config, store).run_id


def _shape(record) -> tuple:
    return (
        record.status,
        record.error_kind,
        record.output_tokens,
        record.finish_reason,
        len(record.chunk_ns),
    )


def test_the_public_reader_measures_the_sim_like_the_fast_path_and_the_meta_says_which_ran(
    tmp_path, monkeypatch
):
    with (
        sim_process("--ttft-ms", str(TTFT_MS), "--itl-ms", str(ITL_MS)) as url,
        Store.open(tmp_path / "r.db") as store,
    ):
        fast = store.load_run(_bench(url, store))
        monkeypatch.delattr(aiohttp, "StreamReader")  # the export the fast path needs; aiohttp itself runs on
        plain = store.load_run(_bench(url, store))
    assert fast.meta.client_edge is not None and fast.meta.client_edge.body == "protocol-callback"
    edge = plain.meta.client_edge
    assert edge is not None
    assert (edge.aiohttp_version, edge.body, edge.stall_timer) == (
        aiohttp.__version__,
        "public-reader",
        "aiohttp",
    )
    assert edge.missing[0] == "aiohttp.StreamReader"
    assert [_shape(r) for r in plain.requests] == [_shape(r) for r in fast.requests]
    for stored in (fast, plain):
        (level,) = (lv.summary for lv in stored.levels)
        assert (level.stats.completed, level.stats.errors) == (8, 0)
        assert (level.stats.ttft_ms.min or 0) >= TTFT_MS
        if level.valid:  # a client starved of CPU by a busy shared host says so instead
            assert level.stats.itl_ms.p50 == pytest.approx(ITL_MS, abs=TOL_MS)
            assert level.stats.tpot_ms.p50 == pytest.approx(ITL_MS, abs=TOL_MS)
        assert level.stats.tokens.output == 8 * OUT


@pytest.mark.parametrize(
    ("fault", "kind"), [("drop", "dropped"), ("malformed", "malformed"), ("stall", "timeout")]
)
def test_the_public_reader_gives_the_same_error_kinds(fault, kind, tmp_path, monkeypatch):
    monkeypatch.delattr(aiohttp, "StreamReader")
    with (
        sim_process("--itl-ms", "5", "--ttft-ms", "10", "--fault", f"{fault}:0.5") as url,
        Store.open(tmp_path / "r.db") as store,
    ):
        stored = store.load_run(_bench(url, store, levels=(2,), requests=4, warmup=0, stall_timeout_s=0.5))
    assert stored.meta.client_edge is not None and stored.meta.client_edge.body == "public-reader"
    (level,) = (lv.summary.stats for lv in stored.levels)
    assert (level.requests, level.completed, level.errors) == (4, 2, 2)
    assert level.errors_by_kind == {kind: 2}

"""The bill at a glance: short unique series labels, the field report's table beside the plan's ceilings, the
one-sentence verdict per engine and the faster engine per scenario (synthetic runs with known timings)."""

from __future__ import annotations

from pathlib import Path

from servelab.plan.io import plan_document
from servelab.report import assemble
from servelab.report.data import Bill, EngineSummary, model_name, series_labels
from servelab.report.glance import faster_per_scenario, glance_table
from servelab.report.levels import level_figures
from servelab.report.page import build_page
from servelab.report.verdict import engine_verdict
from servelab.results.level_key import Level
from servelab.store import Store
from tests.runs_factory import level_records, store_run
from tests.unit.test_report_bill import PLAN

CLIENT_LAG = "client event-loop lag p99 9.00 ms > 5 ms: the client was the bottleneck"


def _runs(tmp_path: Path, *ids_kwargs: dict):
    db = tmp_path / "r.db"
    ids = [store_run(db, **kwargs) for kwargs in ids_kwargs]
    with Store.open(db) as store:
        return [store.load_run(i) for i in ids]


def test_a_model_path_becomes_its_file_name_and_a_repository_id_stays() -> None:
    assert model_name("/tmp/servelab-demo-20261201T1200/hybrid.gguf") == "hybrid"
    assert model_name("C:\\models\\dense.gguf") == "dense" and model_name("./m/tiny.gguf") == "tiny"
    assert model_name("Qwen/Qwen3-8B") == "Qwen/Qwen3-8B" and model_name("<b>x</b>") == "<b>x</b>"


def test_labels_add_the_run_id_only_where_two_would_collide_and_stay_under_60() -> None:
    labels = series_labels(
        [
            ("llamacpp", "/tmp/a/hybrid.gguf", "short", "R1"),
            ("llamacpp", "/tmp/b/hybrid.gguf", "short", "R2"),
            ("vllm", "m" * 90, "mixed", "R2"),
            ("vllm", "/tmp/c/dense.gguf", "short", "R2"),
        ]
    )
    assert labels[0] == "llamacpp · hybrid · short · R1" and labels[1] == "llamacpp · hybrid · short · R2"
    assert labels[2].startswith("vllm · mmm") and labels[2].endswith("… · mixed") and len(labels[2]) == 59
    assert labels[3] == "vllm · dense · short"
    same = series_labels([("vllm", "x", "short", "R1"), ("vllm", "x", "short", "R1")])
    assert len(set(same)) == 2 and all(len(label) < 60 for label in same)


def test_the_glance_table_shows_each_figure_beside_its_ceiling(tmp_path: Path) -> None:
    (run,) = _runs(tmp_path, {"model": "/tmp/servelab-demo-x/hybrid.gguf"})
    bill = assemble([run], plan_document(PLAN))
    table = glance_table(bill)
    (row,) = table.rows
    # c=1: 16 tokens, ITL 10 ms → 100 tok/s of the plan's 200; context 2048 of 4096 planned; memory unknown
    assert row[:5] == (
        "llamacpp · hybrid · short",
        "100.0 (50%)",
        "267.3 @ c=4",
        "2,048 (50%)",
        "— / 4.00 GiB",
    )
    assert row[5] == (
        "Below the bandwidth ceiling (50% of the decode ceiling at one user); "
        "aggregate scales 3.4× from c=1 to c=4."
    )
    assert build_page(bill)[0].key == "summary" and build_page(bill)[0].blocks[0] == table


def test_the_verdict_names_a_client_bound_level_and_evictions_first(tmp_path: Path) -> None:
    (run,) = _runs(tmp_path, {"invalid": {"c=4": CLIENT_LAG, "c=2": "result store blocked for 2.0 s"}})
    bill = assemble([run])
    sentence = engine_verdict(bill, bill.engines[0])
    assert sentence.startswith(
        "Client-bound at c=4 (the load generator"
    )  # c=2's store reason is not the client
    assert "c=2" not in sentence.split(";")[0]


def test_two_engines_name_the_faster_per_scenario(tmp_path: Path) -> None:
    (run,) = _runs(tmp_path, {"engines": ("llamacpp", "sglang")})  # target 1 has twice the ITL
    bill = assemble([run])
    by = {v.scenario: v for v in faster_per_scenario(bill)}
    assert list(by) == ["single user", "aggregate", "mixed-load tail"]
    assert by["single user"].sentence == "llamacpp · tiny-test-model · short (100.0 vs 50.0 tok/s, 2.00×)"
    assert by["aggregate"].choice == "llamacpp · tiny-test-model · short"
    assert by["mixed-load tail"].choice is None and "a tie" in by["mixed-load tail"].sentence  # same TTFTs
    assert faster_per_scenario(assemble([run], plan_document(PLAN))) != []
    (tmp_path / "one").mkdir()
    (single,) = _runs(tmp_path / "one", {})
    assert faster_per_scenario(assemble([single])) == []


def _level(concurrency: int, ttft_ms: float, itl_ms: float):
    return level_figures(
        0, Level.closed(concurrency), level_records(0, concurrency, ttft_ms=ttft_ms, itl_ms=itl_ms)
    )


def test_more_concurrency_past_the_plateau_is_queueing() -> None:
    levels = (_level(1, 50, 10), _level(2, 50, 10), _level(4, 400, 12))  # c=4: no more tokens/s, 8× the TTFT
    engine = EngineSummary(
        label="llamacpp · m · short",
        run_id="R",
        target_index=0,
        engine="llamacpp",
        model="m",
        url="http://127.0.0.1:1",
        partial=False,
        levels=levels,
        usable_context=None,
        memory_used_bytes=None,
    )
    bill = Bill(
        run_ids=("R",),
        engines=(engine,),
        warnings=(),
        plan=None,
        plan_model=None,
        plan_gpu=None,
        doctor=None,
        spec=None,
    )
    assert levels[2].aggregate_tok_s < 1.1 * levels[1].aggregate_tok_s
    sentence = engine_verdict(bill, engine)
    assert sentence.startswith("Queueing beyond c=2: at c=4 TTFT p50 is 8.0× while aggregate changes")

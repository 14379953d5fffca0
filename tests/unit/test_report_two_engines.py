"""A bill of two engines, each held against its own plan entry, compared per scenario on like workloads, with
the mixed workload's evictions and tails side by side (synthetic runs with known timings)."""

from __future__ import annotations

from pathlib import Path

import pytest

from servelab.plan.io import plan_document
from servelab.report import assemble
from servelab.report.glance import faster_per_scenario, glance_table, tail_table
from servelab.report.page import build_page
from servelab.report.plan_figures import plans_for
from servelab.report.verdict import single_user
from servelab.results.run import RunWorkload
from servelab.store import Store
from tests.runs_factory import MS, make_record, store_run

pytestmark = pytest.mark.usefixtures("measured_host")  # the bill's bound reads this machine's bandwidth

GIB = 1024**3
TWO_PLANS = {
    "model": "servelab-llama",
    "gpu": "cpu",
    "plans": [
        {
            "engine": "llamacpp",
            "quant": "f16",
            "context": 4096,
            "fits": True,
            "memory_bytes": {"total": GIB},
            "decode_ceiling_tok_s": {"short": 200.0, "full_context": 100.0},
            "decode_batch_tok_s": [{"batch": 4, "aggregate_tok_s": 800.0}],
        },
        {
            "engine": "vllm",
            "quant": "bf16",
            "context": 4096,
            "fits": True,
            "memory_bytes": {"total": 2 * GIB},
            "decode_ceiling_tok_s": {"short": 250.0, "full_context": 125.0},
            "decode_batch_tok_s": [{"batch": 4, "aggregate_tok_s": 1000.0}],
        },
    ],
}
MIXED = RunWorkload(kind="mixed", input_tokens=32, output_tokens=16)


def _bill(tmp_path: Path, *, evicted_in_mixed: int = 0):
    db = tmp_path / "r.db"
    short = store_run(db, engines=("llamacpp", "vllm"))  # target 1 (vllm) has twice the ITL
    mixed = store_run(db, engines=("llamacpp", "vllm"), workload=MIXED)
    with Store.open(db) as store:
        for i in range(evicted_in_mixed):  # llama.cpp's requests whose decode stalled behind a long prefill
            store.add_request(
                mixed,
                make_record(
                    0,
                    "c=4",
                    100 + i,
                    start_ns=20_000 * MS,
                    ttft_ms=900,
                    itl_ms=5,
                    output_tokens=16,
                    evicted=True,
                ),
            )
        runs = [store.load_run(short), store.load_run(mixed)]
    return assemble(runs, plan_document(TWO_PLANS))


def test_each_engine_is_measured_against_its_own_plan(tmp_path: Path) -> None:
    bill = _bill(tmp_path)
    rows = {row[0]: row for row in glance_table(bill).rows}
    llama, vllm = rows["llamacpp · tiny-test-model · short"], rows["vllm · tiny-test-model · short"]
    assert llama[1] == "100.0 (50%)" and vllm[1] == "50.0 (20%)"  # 100 of 200; 50 of vLLM's 250, not of 200
    assert llama[4] == "— / 1.00 GiB" and vllm[4] == "— / 2.00 GiB"
    assert llama[2] == "267.3 @ c=4 (33%)" and vllm[2] == "157.2 @ c=4 (16%)"  # of 800; of 1000, not 800
    assert {e.engine: e.plan.engine for e in bill.engines if e.plan} == {
        "llamacpp": "llamacpp",
        "vllm": "vllm",
    }
    paragraphs = [b.text for b in build_page(bill)[0].blocks if hasattr(b, "text")]
    assert any("vllm, bf16, context 4096; decode ceiling 250.0 tok/s short" in p for p in paragraphs)
    assert single_user(bill).sentence.endswith(
        "that is 50% of the 200.0 tok/s bandwidth ceiling of the plan."
    )


def test_an_engine_without_its_own_entry_is_not_held_against_another_engines_plan() -> None:
    doc = plan_document({"plans": [{"engine": "llamacpp", "context": 4096}]})
    llama, other = plans_for(doc, ["llama.cpp", "vllm"])
    assert llama is not None and llama.engine == "llamacpp" and other is None
    (whole,) = plans_for(doc, ["openai"])  # a document naming none of the bill's engines holds them all
    assert whole is llama
    unnamed = plan_document({"plans": [{"engine": "llamacpp"}, {"context": 1024}]})
    assert plans_for(unnamed, ["llamacpp", "vllm"])[1].context == 1024


def test_scenarios_compare_like_workloads_and_the_tail_is_the_mixed_ones(tmp_path: Path) -> None:
    bill = _bill(tmp_path)
    by = {v.scenario: v for v in faster_per_scenario(bill)}
    assert list(by) == ["single user", "aggregate", "mixed-load tail"]
    assert by["single user"].sentence == "llamacpp · tiny-test-model · short (100.0 vs 50.0 tok/s, 2.00×)"
    assert by["aggregate"].choice == "llamacpp · tiny-test-model · short"
    tail = by["mixed-load tail"]
    assert tail.choice is None and "a tie (TTFT p99 at c=4" in tail.sentence  # the same TTFTs
    assert "TPOT p99 llamacpp · tiny-test-model · mixed" in tail.sentence and "· short" not in tail.sentence


def test_the_mixed_tail_table_counts_evictions_side_by_side(tmp_path: Path) -> None:
    bill = _bill(tmp_path, evicted_in_mixed=2)
    table = tail_table(bill)
    assert table is not None and table.key == "mixed-tail"
    rows = {(r[0], r[1]): r for r in table.rows}
    assert [r[:2] for r in table.rows][:2] == [
        ("c=1", "llamacpp · tiny-test-model · mixed"),
        ("c=1", "vllm · tiny-test-model · mixed"),
    ]
    assert rows[("c=4", "llamacpp · tiny-test-model · mixed")][2:4] == (
        "14",
        "2",
    )  # 12 + 2 stalled, 2 evicted
    assert rows[("c=4", "vllm · tiny-test-model · mixed")][2:4] == ("12", "0")
    assert rows[("c=4", "llamacpp · tiny-test-model · mixed")][5] == "900"  # the stalled ones make the p99
    tail = {v.scenario: v for v in faster_per_scenario(bill)}["mixed-load tail"]
    assert tail.choice == "vllm · tiny-test-model · mixed"
    assert table in build_page(bill)[0].blocks

"""`servelab bench` against the shared real vLLM (``vllm_live``): the level's server figures from /metrics
(bench/server_metrics.py, engines/vllm/bench_extras.py SERVER_METRICS) agree with the requests the bench sent
and recorded, and the bill shows them (docs/reference/vllm-cpu.md §10)."""

from __future__ import annotations

import json

from servelab.cli.app import main
from servelab.store import Store

BLOCK = 128  # the shared server's block size (test_live_server.py checks it from cache_config_info)
GROUP = 4  # shared-prefix: prompts i // 4 share 3/4 of the prompt (~450 of 600 tokens: 3 full blocks)
LEVELS = ("c=1", "c=2")


def _bench(vllm_live, db, capsys) -> str:
    argv = [
        "bench",
        vllm_live.url,
        "--concurrency",
        "1,2",
        "--requests",
        "4",
        "--workload",
        "shared-prefix",
        "--input-tokens",
        "600",
        "--output-tokens",
        "24",
        "--seed",
        "1207",
        "--db",
        str(db),
        "--no-power",
        "--json",
    ]
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)["run_id"]


def test_a_ladders_server_counters_are_the_records_sums(vllm_live, tmp_path, capsys):
    db = tmp_path / "runs.db"
    run_id = _bench(vllm_live, db, capsys)
    with Store.open(db, must_exist=True) as store:
        run = store.load_run(run_id)
    assert {lv.level.label for lv in run.levels} == set(LEVELS)
    seen: set[int] = set()  # prompts sent earlier in the c=1 level
    for stored in sorted(run.levels, key=lambda lv: LEVELS.index(lv.level.label)):
        label = stored.level.label
        records = sorted((r for r in run.requests if r.level == label), key=lambda r: r.sent_ns)
        assert records and all(r.status == "ok" for r in records), label
        server = stored.summary.server
        counters = server["counters"]
        assert counters["request_success"] == len(records)  # warm-up requests included
        assert counters["prompt_tokens"] == sum(r.prompt_tokens for r in records)
        assert counters["generation_tokens"] == sum(r.output_tokens for r in records) == 24 * len(records)
        assert counters["preemptions"] == 0  # 2 sequences of ~630 tokens in a 524,288-token pool
        assert counters["prefix_cache_queries"] == counters["prompt_tokens"]  # each prompt looked up once
        assert counters["prefix_cache_hits"] % BLOCK == 0  # only full blocks are shared
        assert counters["prefix_cache_hits"] <= counters["prefix_cache_queries"]
        if label == "c=1":  # one at a time: a prompt whose group's earlier prompt ran finds its prefix
            followers = 0
            for r in records:
                followers += bool(r.request_index % GROUP and r.request_index - 1 in seen)
                seen.add(r.request_index)
            assert followers and counters["prefix_cache_hits"] >= 3 * BLOCK * followers
        gauges = server["gauges"]
        concurrency = stored.level.concurrency or 0
        assert gauges["requests_running"]["samples"] >= 1
        assert 0 <= gauges["requests_running"]["max"] <= concurrency
        assert 0 <= gauges["requests_waiting"]["max"] <= concurrency
        assert 0.0 <= gauges["kv_cache_usage"]["max"] <= 1.0
    c2 = next(lv for lv in run.levels if lv.level.label == "c=2").summary.server["counters"]

    bill = tmp_path / "bill.md"
    assert main(["report", run_id, "--db", str(db), "-o", str(bill)]) == 0
    _, table = bill.read_text().split("As the server counted it (/metrics)", 1)
    row = next(line for line in table.splitlines() if line.startswith("| c=2 "))
    assert f"{c2['prompt_tokens']:,}" in row or str(c2["prompt_tokens"]) in row

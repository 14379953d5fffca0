"""Speculative decoding on the real vLLM CPU build: an n-gram server (its own, started and stopped here), benched
with a repetitive prompt; `servelab spec --metrics-url` reports the acceptance the server's /metrics counters hold,
and the bench level's server figures carry the same counters (engines/vllm/speculative.py, bench_extras.py;
docs/reference/vllm-cpu.md §12)."""

from __future__ import annotations

import json
import urllib.request

from servelab.cli.app import main
from servelab.engines.prometheus import metric_sums
from servelab.store import Store
from tests.integration.vllm.conftest import start_test_vllm

GAMMA = 3
NGRAM = json.dumps({"method": "ngram", "num_speculative_tokens": GAMMA, "prompt_lookup_max": 3})
COUNTERS = (
    "vllm:spec_decode_num_accepted_tokens_total",
    "vllm:spec_decode_num_draft_tokens_total",
    "vllm:spec_decode_num_drafts_total",
)
REPEATED = "one two three four five six seven eight " * 24  # n-gram drafts come from the context
# greedy (--temperature 0): the tiny random model then repeats itself, which n-gram lookup drafts; at the server's
# default temperature of 1 it found no 3-token match at all (0 drafts)


def _counters(url: str) -> dict[str, float]:
    with urllib.request.urlopen(f"{url}/metrics", timeout=30) as answer:
        return metric_sums(answer.read().decode(), COUNTERS)


def test_ngram_acceptance_is_read_from_the_servers_counters(
    vllm_program, vllm_model_dir, vllm_cache, tmp_path, capsys
):
    workload = tmp_path / "repeat.jsonl"
    workload.write_text(json.dumps({"prompt": REPEATED, "max_tokens": 64}) + "\n")
    server = start_test_vllm(
        vllm_program,
        vllm_model_dir,
        tmp_path,
        "--max-model-len",
        "2048",
        "--enforce-eager",
        "--speculative-config",
        NGRAM,
        cache_dir=vllm_cache,
    )
    try:
        log = server.log_path.read_text()
        db = tmp_path / "runs.db"
        bench = [
            "bench",
            server.url,
            "--concurrency",
            "1",
            "--requests",
            "3",
            "--workload",
            str(workload),
            "--temperature",
            "0",
            "--db",
            str(db),
            "--no-power",
            "--json",
        ]
        assert main(bench) == 0
        run_id = json.loads(capsys.readouterr().out)["run_id"]
        totals = _counters(server.url)
        assert main(["spec", "--metrics-url", server.url, "--json"]) == 0
        spec = json.loads(capsys.readouterr().out)
    finally:
        server.stop()
    accepted, drafted, drafts = (totals[name] for name in COUNTERS)
    assert "SpeculativeConfig(method='ngram'" in log and drafts > 0
    assert drafts <= drafted <= GAMMA * drafts  # a draft is as long as the match found, up to gamma tokens
    assert accepted > 0, "a repetitive context gives n-gram drafts the model accepts"
    assert spec["acceptance_source"] == "metrics" and spec["engine"] == "vllm"
    assert spec["draft_tokens"] == GAMMA  # round(drafted / drafts)
    assert spec["token_accept_rate"] == accepted / drafted
    assert (
        spec["expected_tokens_per_step"] == 1 + accepted / drafts
    )  # accepted per verify step, bonus included

    with Store.open(db, must_exist=True) as store:
        (level,) = store.load_run(run_id).levels
    counters = level.summary.server["counters"]  # the level sent every request this fresh server answered
    assert (counters["spec_accepted_tokens"], counters["spec_draft_tokens"], counters["spec_drafts"]) == (
        accepted,
        drafted,
        drafts,
    )

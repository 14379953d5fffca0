"""--trace against `servelab sim`: requests go at the traced times (the sim's own arrival clock) with the
traced lengths (the sim's prompt and answer token counts), for each layout; a bad row is one line."""

from __future__ import annotations

import json
import statistics
import urllib.request

import pytest

from servelab.bench.config import BenchConfig
from servelab.bench.runner import run
from servelab.bench.schedule import StopRule
from servelab.bench.trace import load_trace
from servelab.cli.app import main
from servelab.store import Store
from tests.bench_sim import sim_process

pytestmark = pytest.mark.timing  # wall-clock figures against the sim: run with no other test beside it

LENGTHS = [(600, 3), (700, 5), (40, 2), (1100, 4), (90, 6), (12, 2)]
TIMES_MS = [0, 0, 150, 400, 430, 700]


def _mooncake(path):
    ids = [[0, 1], [0, 2], [3], [0, 1, 4], [5], [6]]
    path.write_text(
        "".join(
            json.dumps({"timestamp": 5000 + t, "input_length": n, "output_length": o, "hash_ids": h}) + "\n"
            for t, (n, o), h in zip(TIMES_MS, LENGTHS, ids, strict=True)
        )
    )


def _azure(path):
    rows = [
        f"2023-11-16 18:17:{3 + t / 1000:09.6f},{n},{o}" for t, (n, o) in zip(TIMES_MS, LENGTHS, strict=True)
    ]
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + "\n".join(rows) + "\n")


def _servelab(path):
    path.write_text(
        "".join(
            json.dumps({"at_ms": t, "input_tokens": n, "output_tokens": o}) + "\n"
            for t, (n, o) in zip(TIMES_MS, LENGTHS, strict=True)
        )
    )


@pytest.mark.parametrize("write", [_mooncake, _azure, _servelab])
def test_replay_sends_at_the_traced_times_with_the_traced_lengths(tmp_path, write):
    path = tmp_path / "trace.txt"
    write(path)
    trace = load_trace(path, speed=2.0)
    with sim_process("--ttft-ms", "5", "--itl-ms", "5") as url, Store.open(tmp_path / "r.db") as store:
        result = run(BenchConfig(targets=(url,), trace=trace, stop=StopRule(requests=1)), store)
        stored = store.load_run(result.run_id)
        with urllib.request.urlopen(url + "/sim/requests", timeout=5) as response:
            arrived = {k: v["t0_ns"] for k, v in json.loads(response.read()).items()}
    (level,) = result.to_json()["targets"][0]["levels"]
    assert level["level"] == f"r={trace.mean_rate_rps:g}" and level["requests"] == len(LENGTHS)
    measured = sorted((r for r in stored.requests if r.phase == "measure"), key=lambda r: r.intended_ns)
    assert [r.intended_ns - measured[0].intended_ns for r in measured] == [
        t * 1_000_000 // 2 for t in TIMES_MS
    ]
    # the sim stamps arrivals on the same monotonic clock: each request reached it after its traced time,
    # typically within the client's stamp error
    late_ms = [(arrived[r.request_id] - r.intended_ns) / 1e6 for r in measured]
    assert min(late_ms) >= 0 and statistics.median(late_ms) < 5.0
    # the server's own counts: prompt tokens (the sim's tokenizer, chat template included) and answer tokens
    assert [(r.prompt_tokens, r.output_tokens) for r in measured] == LENGTHS
    assert stored.meta.workload is not None and stored.meta.workload.kind == "trace"
    assert stored.meta.settings["trace"]["speed"] == 2.0


def test_a_bad_trace_row_is_one_line_before_any_load(tmp_path, capsys):
    path = tmp_path / "bad.jsonl"
    path.write_text(
        '{"timestamp": 0, "input_length": 5, "output_length": 2}\n{"timestamp": 1, "input_length": "x"}\n'
    )
    with sim_process() as url:
        assert main(["bench", url, "--trace", str(path), "--db", str(tmp_path / "r.db")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--trace {path}: line 2: input_length must be a whole number" in err
    for args, words in (
        (["--trace", str(path), "--rate", "3"], "drop --rate"),
        (["--trace-speed", "2"], "--trace-speed only goes with --trace"),
    ):
        assert main(["bench", "http://127.0.0.1:9", *args]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and words in err, err

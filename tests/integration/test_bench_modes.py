"""Load modes and workloads against `servelab sim`: open loop, repeats, duration, samplers, YAML, presets."""

from __future__ import annotations

import json

import pytest

from servelab.bench.config import BenchConfig
from servelab.bench.metrics import Slo
from servelab.bench.runner import run
from servelab.bench.schedule import StopRule, arrival_offsets_ns
from servelab.bench.workloads import WorkloadSpec
from servelab.cli.app import main
from servelab.store import Store
from tests.bench_sim import sim_process

FAST = ("--ttft-ms", "5", "--itl-ms", "5")


def stored_run(url: str, tmp_path, **kw):
    config = BenchConfig(targets=(url,), **{"warmup": 0, **kw})
    with Store.open(tmp_path / "r.db") as store:
        result = run(config, store, samplers=kw.pop("samplers", ()))
        return result.to_json(), store.load_run(result.run_id)


@pytest.mark.timing
def test_open_loop_sends_on_the_absolute_schedule_and_reports_lateness(tmp_path):
    with sim_process(*FAST) as url:
        result, stored = stored_run(
            url, tmp_path, rate=40.0, stop=StopRule(requests=20), workload=WorkloadSpec("short", 8, 4), seed=7
        )
    (level,) = result["targets"][0]["levels"]
    assert level["level"] == "r=40" and level["completed"] == 20
    records = sorted(stored.requests, key=lambda r: r.intended_ns)
    offsets = [r.intended_ns - records[0].intended_ns for r in records]
    assert offsets == arrival_offsets_ns(40.0, 20, seed=7)  # precomputed, absolute
    assert all(r.sent_ns >= r.intended_ns for r in records)
    assert level["lateness_ms"]["p50"] < 5.0 and level["ttft_sched_ms"]["n"] == 20


def test_repeats_give_confidence_intervals_and_fresh_prompts(tmp_path):
    with sim_process(*FAST) as url:
        result, stored = stored_run(
            url,
            tmp_path,
            concurrency=(2,),
            repeat=3,
            stop=StopRule(requests=4),
            workload=WorkloadSpec("short", 8, 4),
        )
    (level,) = result["targets"][0]["levels"]
    assert level["repeats"] == 3 and level["completed"] == 12
    ci = level["ci95"]["output_tok_s"]
    assert ci["mean"] == pytest.approx(level["output_tok_s"]) and ci["half_width"] >= 0
    assert len({r.request_index for r in stored.requests}) == 12
    assert {lv.repeat for lv in stored.levels} == {0, 1, 2}


@pytest.mark.timing
def test_duration_stop_and_error_budget(tmp_path):
    with sim_process(*FAST) as url:
        result, _ = stored_run(
            url,
            tmp_path,
            concurrency=(2,),
            stop=StopRule(duration_s=0.5),
            workload=WorkloadSpec("short", 8, 4),
        )
    level = result["targets"][0]["levels"][0]
    assert level["completed"] >= 10 and level["window"]["seconds"] <= 0.7
    with sim_process(*FAST, "--fault", "500") as url:
        result, _ = stored_run(
            url,
            tmp_path,
            concurrency=(1,),
            stop=StopRule(requests=50, max_errors=3),
            workload=WorkloadSpec("short", 8, 4),
        )
    level = result["targets"][0]["levels"][0]
    assert level["errors"] == 4 and level["requests"] == 4  # the 4th error exhausts a budget of 3


class ListSampler:
    """A real sampler: records the moments it was started and stopped."""

    kind = "test_samples"

    def __init__(self) -> None:
        self.started = 0

    def start(self) -> None:
        self.started += 1

    def stop(self) -> list[dict]:
        return [{"t_ns": self.started, "value": 1.5}]


def test_samplers_run_per_level_and_their_rows_are_stored(tmp_path):
    sampler = ListSampler()
    with sim_process(*FAST) as url:
        config = BenchConfig(
            targets=(url,),
            concurrency=(1, 2),
            stop=StopRule(requests=2),
            warmup=0,
            workload=WorkloadSpec("short", 8, 4),
        )
        with Store.open(tmp_path / "r.db") as store:
            run_id = run(config, store, samplers=[sampler]).run_id
            samples = store.load_run(run_id).samples
    assert sampler.started == 2
    assert [row["t_ns"] for row in samples["test_samples"]] == [1, 2]
    assert [(r["target_index"], r["level"], r["repeat"]) for r in samples["test_samples"]] == [
        (0, "c=1", 0),
        (0, "c=2", 0),
    ]


@pytest.mark.parametrize("kind", ["short", "mixed", "shared-prefix", "multi-turn"])
def test_presets_reach_the_server_with_the_lengths_they_claim(tmp_path, kind):
    with sim_process(*FAST) as url:
        _, stored = stored_run(
            url, tmp_path, concurrency=(1,), stop=StopRule(requests=8), workload=WorkloadSpec(kind, 40, 4)
        )
    assert len(stored.requests) == 8
    for r in stored.requests:  # the sim's /tokenize counts its chat template, as its usage does
        assert r.prompt_tokens == r.expected_prompt_tokens
    if kind == "mixed":
        assert max(r.prompt_tokens for r in stored.requests) > 1000
    if kind in ("shared-prefix", "multi-turn"):
        assert any(r.expected_cached_tokens for r in stored.requests)


@pytest.mark.timing
def test_slo_goodput(tmp_path):
    with sim_process("--ttft-ms", "20", "--itl-ms", "5") as url:
        result, _ = stored_run(
            url,
            tmp_path,
            concurrency=(1,),
            stop=StopRule(requests=3),
            workload=WorkloadSpec("short", 8, 4),
            slo=Slo(ttft_ms=10.0),
        )
    level = result["targets"][0]["levels"][0]
    assert level["slo_attainment"] == 0.0 and level["goodput_req_s"] == 0.0


def test_experiment_yaml_and_jsonl_workload(tmp_path, capsys):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(
        '{"prompt": "one two three", "max_tokens": 3}\n{"messages": [{"role": "user", "content": "a b"}]}\n'
    )
    with sim_process(*FAST) as url:
        experiment = tmp_path / "exp.yaml"
        experiment.write_text(
            f"targets:\n  - url: {url}\nconcurrency: [1]\nrequests: 4\nwarmup: 0\n"
            f"workload: {prompts}\noutput_tokens: 5\nname: from-yaml\n"
        )
        code = main(["bench", "--config", str(experiment), "--db", str(tmp_path / "r.db"), "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    (level,) = out["targets"][0]["levels"]
    assert level["completed"] == 4 and level["tokens"]["output"] == 3 + 5 + 3 + 5
    with Store.open(tmp_path / "r.db") as store:
        assert store.load_run(out["run_id"]).info.name == "from-yaml"


def test_two_targets_get_identical_prompts_in_the_same_order(tmp_path):
    with sim_process(*FAST) as a, sim_process(*FAST, "--model", "sim-model") as b:
        config = BenchConfig(
            targets=(a, b),
            concurrency=(1,),
            stop=StopRule(requests=3),
            warmup=0,
            workload=WorkloadSpec("short", 8, 4),
        )
        with Store.open(tmp_path / "two.db") as store:
            run_id = run(config, store).run_id
            records = store.load_run(run_id).requests
    order = {t: [r.request_index for r in records if r.target_index == t] for t in (0, 1)}
    assert order[0] == order[1] == [0, 1, 2]
    lengths = {t: [r.prompt_tokens for r in records if r.target_index == t] for t in (0, 1)}
    assert lengths[0] == lengths[1]


def test_cli_prints_the_ladder_table_on_stdout_and_progress_on_stderr(tmp_path, capsys):
    with sim_process(*FAST) as url:
        code = main(
            [
                "bench",
                url,
                "--concurrency",
                "1,2",
                "--requests",
                "2",
                "--output-tokens",
                "4",
                "--input-tokens",
                "8",
                "--db",
                str(tmp_path / "r.db"),
            ]
        )
    captured = capsys.readouterr()
    assert code == 0
    assert "c=1" in captured.out and "c=2" in captured.out and "complete" in captured.out
    assert "c=2 repeat 0" in captured.err and "Traceback" not in captured.err


@pytest.mark.timing
def test_keepalive_comments_are_not_tokens_and_completions_work(tmp_path):
    with sim_process("--ttft-ms", "30", "--itl-ms", "5", "--keepalive-ms", "4") as url:
        result, stored = stored_run(
            url,
            tmp_path,
            concurrency=(1,),
            stop=StopRule(requests=2),
            chat=False,
            workload=WorkloadSpec("short", 8, 6, chat=False),
        )
    level = result["targets"][0]["levels"][0]
    assert level["completed"] == 2 and level["ttft_ms"]["min"] >= 30.0
    assert all(r.output_tokens == 6 == sum(r.chunk_tokens) for r in stored.requests)


@pytest.mark.timing
def test_sim_answers_without_streaming_after_the_whole_schedule():
    import time
    import urllib.request

    with sim_process("--ttft-ms", "20", "--itl-ms", "10") as url:
        body = json.dumps({"messages": [{"role": "user", "content": "a b c"}], "max_tokens": 5}).encode()
        request = urllib.request.Request(url + "/v1/chat/completions", data=body, method="POST")
        start = time.perf_counter()
        with urllib.request.urlopen(request, timeout=10) as response:
            answer = json.loads(response.read())
        elapsed_ms = (time.perf_counter() - start) * 1000
    assert answer["choices"][0]["message"]["content"] == "t0 t1 t2 t3 t4 "
    assert answer["usage"] == {"prompt_tokens": 3 + 4 + 2, "completion_tokens": 5, "total_tokens": 14}
    assert elapsed_ms >= 20 + 4 * 10

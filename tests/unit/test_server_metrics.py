"""bench/server_metrics.py: a level's counters' growth and gauges' peak/mean from /metrics texts (exact values)."""

from __future__ import annotations

from servelab.bench.server_metrics import level_server_metrics, pool_server_metrics
from servelab.engines.vllm.bench_extras import SERVER_METRICS


def _text(prompt: float, success_length: float, running: float, usage: float, extra: str = "") -> str:
    return (
        "# TYPE vllm:prompt_tokens_total counter\n"
        f'vllm:prompt_tokens_total{{engine="0",model_name="m"}} {prompt}\n'
        "# TYPE vllm:request_success_total counter\n"
        f'vllm:request_success_total{{engine="0",finished_reason="length",model_name="m"}} {success_length}\n'
        'vllm:request_success_total{engine="0",finished_reason="stop",model_name="m"} 2.0\n'
        "# TYPE vllm:num_requests_running gauge\n"
        f'vllm:num_requests_running{{engine="0",model_name="m"}} {running}\n'
        "# TYPE vllm:kv_cache_usage_perc gauge\n"
        f'vllm:kv_cache_usage_perc{{engine="0",model_name="m"}} {usage}\n' + extra
    )


def test_counters_grow_over_the_level_and_gauges_are_sampled():
    before, after = _text(100.0, 3.0, 0.0, 0.0), _text(1300.0, 7.0, 0.0, 0.0)
    sampled = [_text(0, 0, 2.0, 0.25), _text(0, 0, 1.0, 0.5), "not prometheus at all {"]
    server = level_server_metrics(before, after, sampled, SERVER_METRICS)
    assert server["counters"] == {"prompt_tokens": 1200, "request_success": 4}
    assert server["gauges"] == {
        "requests_running": {"max": 2, "mean": 1.5, "samples": 2},
        "kv_cache_usage": {"max": 0.5, "mean": 0.375, "samples": 2},
    }


def test_a_counter_first_exposed_during_the_level_counts_from_zero():
    preempt = "# TYPE vllm:num_preemptions_total counter\nvllm:num_preemptions_total 3.0\n"
    server = level_server_metrics(_text(0, 0, 0, 0), _text(0, 0, 0, 0, preempt), [], SERVER_METRICS)
    assert server["counters"]["preemptions"] == 3
    assert "gauges" not in server


def test_without_both_snapshots_there_are_no_counters():
    assert level_server_metrics(None, _text(5, 1, 0, 0), [], SERVER_METRICS) == {}


def test_repeats_pool_counters_added_and_gauges_weighted():
    a = {
        "counters": {"prompt_tokens": 10},
        "gauges": {"requests_running": {"max": 2, "mean": 1.0, "samples": 2}},
    }
    b = {
        "counters": {"prompt_tokens": 5},
        "gauges": {"requests_running": {"max": 4, "mean": 4.0, "samples": 1}},
    }
    assert pool_server_metrics([a, b]) == {
        "counters": {"prompt_tokens": 15},
        "gauges": {"requests_running": {"max": 4, "mean": 2.0, "samples": 3}},
    }
    assert pool_server_metrics([{}, {}]) == {}

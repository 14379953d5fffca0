"""What a bench request carries: the engine's fields, and --temperature only when given."""

from __future__ import annotations

from servelab.bench.target import Target
from servelab.bench.workloads import Prompt
from servelab.engines.http import HttpProbe
from servelab.engines.vllm import bench_extras


def _target() -> Target:
    return Target(
        index=0,
        url="http://127.0.0.1:8000",
        engine="vllm",
        model="m",
        context=2048,
        version="0.32.0",
        extras=bench_extras,
        probe=HttpProbe("http://127.0.0.1:8000"),
    )


def test_temperature_is_sent_only_when_given():
    prompt = Prompt(index=0, output_tokens=8, messages=({"role": "user", "content": "hi"},))
    assert "temperature" not in _target().request_body(prompt, chat=True)
    body = _target().request_body(prompt, chat=True, temperature=0.0)
    assert body["temperature"] == 0.0 and body["max_tokens"] == 8 and body["stream"] is True
    assert body["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}

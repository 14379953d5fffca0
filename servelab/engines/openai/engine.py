"""Any OpenAI-compatible server (NInfer and others): the fallback every detection ends with."""

from __future__ import annotations

from servelab.engines.base import Engine
from servelab.engines.openai import bench_extras, endpoints, verify_rules

ENGINE = Engine(
    name="openai",
    label="OpenAI-compatible",
    aliases=("openai-compatible",),
    endpoints=endpoints,
    verify_rules=verify_rules,
    bench_extras=bench_extras,
    health_path="/v1/models",
    fallback=True,
    model_scoped_endpoints=True,
)

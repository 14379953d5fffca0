"""Ollama, as the registry sees it (the contract: servelab/engines/base.py)."""

from __future__ import annotations

from servelab.engines.base import Engine
from servelab.engines.ollama import bench_extras, cmdline, endpoints, verify_rules
from servelab.engines.ollama.reported import OllamaReported

ENGINE = Engine(
    name="ollama",
    label="Ollama",
    endpoints=endpoints,
    verify_rules=verify_rules,
    bench_extras=bench_extras,
    default_port=11434,
    health_path="/",
    model_scoped_endpoints=True,
    cmdline=cmdline,
    signatures="servelab.engines.ollama",
    reported_type=OllamaReported,
)

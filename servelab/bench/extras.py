"""Which engine-specific benchmark extras apply to a target: the registry's ``bench_extras`` (the contract:
``servelab/engines/base.py`` ``BenchExtras``)."""

from __future__ import annotations

from servelab.engines import registry
from servelab.engines.base import BenchExtras


def extras_for(engine: str) -> BenchExtras:
    """The extras of the engine named ``engine`` (ConfigError for an engine the registry does not know)."""
    return registry.get_engine(engine).bench_extras

"""Which engine answers at a URL: each engine recognises itself; this module asks them in the registry's
order (specific engines first, the plain OpenAI-compatible fallback last)."""

from __future__ import annotations

from dataclasses import replace

from servelab.engines import registry
from servelab.engines.base import Endpoints
from servelab.engines.http import DetectedEngine, HttpProbe, public_url
from servelab.errors import TargetError

__all__ = ["DetectedEngine", "detect_engine", "endpoints_for"]


def detect_engine(
    base_url: str, *, api_key: str | None = None, timeout_s: float = 5.0, max_bytes: int | None = None
) -> DetectedEngine:
    """Ask the server at ``base_url`` who it is. TargetError when unreachable or not OpenAI-compatible."""
    probe = HttpProbe(base_url, api_key, timeout_s)
    if max_bytes is not None:
        probe = replace(probe, max_bytes=max_bytes)
    for engine in registry.engines():
        found = engine.endpoints.identify(probe)
        if found is not None:
            return found
    if probe.status("/health") == 503:
        raise TargetError(
            f"{public_url(probe.base_url)} is still loading (/health answers 503); wait and try again"
        )
    raise TargetError(
        f"{public_url(probe.base_url)} is not an OpenAI-compatible server: GET /v1/models gave no model list"
    )


def endpoints_for(engine: str) -> Endpoints:
    """The endpoints (identify, read_effective) of an engine by name; ConfigError for an unknown one."""
    return registry.get_engine(engine).endpoints

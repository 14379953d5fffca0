"""Which engine answers at a URL: each engine's package recognises itself; this module only orchestrates.

Order matters: llama-server also answers Ollama-style /api/tags, and every engine answers /v1/models, so
the specific probes run first and the plain OpenAI-compatible fallback last.
"""

from __future__ import annotations

from types import ModuleType

from servelab.engines.llamacpp import endpoints as llamacpp
from servelab.engines.ollama import endpoints as ollama
from servelab.engines.openai import endpoints as openai
from servelab.engines.probe import DetectedEngine, HttpProbe, public_url
from servelab.engines.sglang import endpoints as sglang
from servelab.engines.vllm import endpoints as vllm
from servelab.errors import ConfigError, TargetError

__all__ = ["DetectedEngine", "detect_engine", "endpoints_for"]

DETECTION_ORDER = (llamacpp, sglang, vllm, ollama, openai)
_BY_NAME = {"llamacpp": llamacpp, "sglang": sglang, "vllm": vllm, "ollama": ollama, "openai": openai}


def detect_engine(base_url: str, *, api_key: str | None = None, timeout_s: float = 5.0) -> DetectedEngine:
    """Ask the server at ``base_url`` who it is. TargetError when unreachable or not OpenAI-compatible."""
    probe = HttpProbe(base_url, api_key, timeout_s)
    for module in DETECTION_ORDER:
        found = module.identify(probe)
        if found is not None:
            return found
    if probe.status("/health") == 503:
        raise TargetError(
            f"{public_url(probe.base_url)} is still loading (/health answers 503); wait and try again"
        )
    raise TargetError(
        f"{public_url(probe.base_url)} is not an OpenAI-compatible server: GET /v1/models gave no model list"
    )


def endpoints_for(engine: str) -> ModuleType:
    """The ``endpoints`` module of an engine by name (identify, read_effective)."""
    try:
        return _BY_NAME[engine]
    except KeyError:
        raise ConfigError(f"unknown engine {engine!r}; choose one of {', '.join(_BY_NAME)}") from None

"""The one list of engines. Every layer loops over it; adding an engine is one package and one line here.

Order matters where servers are told apart: llama-server also answers Ollama-style /api/tags and every
engine answers /v1/models, so the specific engines come first and the plain OpenAI-compatible one last.
Readers call the functions below (never copy ``REGISTRY``), so a test can register a toy engine by
replacing ``REGISTRY``.
"""

from __future__ import annotations

from servelab.engines.base import Engine, normalise
from servelab.engines.llamacpp.engine import ENGINE as LLAMACPP
from servelab.engines.ollama.engine import ENGINE as OLLAMA
from servelab.engines.openai.engine import ENGINE as OPENAI
from servelab.engines.sglang.engine import ENGINE as SGLANG
from servelab.engines.vllm.engine import ENGINE as VLLM
from servelab.errors import ConfigError

__all__ = [
    "REGISTRY",
    "engines",
    "fallback",
    "find_engine",
    "get_engine",
    "installable",
    "launchable",
    "names",
    "planned",
]

REGISTRY: tuple[Engine, ...] = (LLAMACPP, SGLANG, VLLM, OLLAMA, OPENAI)


def engines() -> tuple[Engine, ...]:
    """Every engine, in detection order."""
    return REGISTRY


def names() -> tuple[str, ...]:
    """Every engine's canonical name (the one stored in results)."""
    return tuple(e.name for e in REGISTRY)


def find_engine(name: str | None) -> Engine | None:
    """The engine ``name`` spells (any alias, any case: ``llama.cpp`` = ``llamacpp``), else None."""
    key = normalise(name or "")
    return next((e for e in REGISTRY if key in e.spellings()), None)


def registry_name(spelling: str) -> str:
    """The registry name ``spelling`` stands for (``llama.cpp`` -> ``llamacpp``), else ``spelling`` as given: the
    key results, plans and band tables file an engine under."""
    found = find_engine(spelling)
    return found.name if found is not None else spelling


def get_engine(name: str, among: tuple[Engine, ...] | None = None, also: tuple[str, ...] = ()) -> Engine:
    """The engine ``name`` spells, among ``among`` (default: all); ConfigError naming the choices (and the
    caller's other words ``also``, such as ``all``) otherwise."""
    choices = REGISTRY if among is None else among
    found = find_engine(name)
    if found is None or found not in choices:
        words = ", ".join((*(e.label for e in choices), *also))
        raise ConfigError(f"unknown engine {name!r}; choose one of: {words}")
    return found


def fallback() -> Engine:
    """The generic OpenAI-compatible engine: its rules apply to a server no other engine claims."""
    return next(e for e in REGISTRY if e.fallback)


def planned() -> tuple[Engine, ...]:
    """The engines ``servelab plan`` has allocation rules for."""
    return tuple(e for e in REGISTRY if e.planner is not None)


def installable() -> tuple[Engine, ...]:
    """The engines ``servelab engine install`` can build, find or register."""
    return tuple(e for e in REGISTRY if e.installer is not None)


def launchable() -> tuple[Engine, ...]:
    """The engines ``servelab serve`` can start."""
    return tuple(e for e in REGISTRY if e.launcher is not None)

"""Reading an ``ollama serve`` command: Ollama takes no serving flags, only OLLAMA_* environment variables.

Names from envconfig/config.go: OLLAMA_CONTEXT_LENGTH, OLLAMA_NUM_PARALLEL, OLLAMA_KV_CACHE_TYPE.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from servelab.engines.flags import to_int

LAUNCH_FORMS = ("ollama serve",)
IMAGE_WORDS = ("ollama",)


@dataclass(frozen=True)
class OllamaLaunch:
    """What ``ollama serve`` and its environment asked for. None: not given."""

    context_length: int | None = None
    num_parallel: int | None = None
    kv_cache_type: str | None = None


def recognises(argv: list[str]) -> bool:
    """True for ``ollama serve`` (any path to ollama)."""
    return bool(argv) and os.path.basename(argv[0]) == "ollama" and argv[1:2] == ["serve"]


def parse(argv: list[str], environment: dict[str, str] | None = None) -> OllamaLaunch:
    """The OLLAMA_* variables; ``argv`` carries nothing verify checks."""
    env = environment or {}
    return OllamaLaunch(
        context_length=to_int(env, "OLLAMA_CONTEXT_LENGTH", "OLLAMA_CONTEXT_LENGTH"),
        num_parallel=to_int(env, "OLLAMA_NUM_PARALLEL", "OLLAMA_NUM_PARALLEL"),
        kv_cache_type=env.get("OLLAMA_KV_CACHE_TYPE") or None,
    )


def expectations(launch: OllamaLaunch) -> dict[str, Any]:
    """What the user meant, in verify's keys."""
    pairs = {"context": launch.context_length, "slots": launch.num_parallel, "kv_dtype": launch.kv_cache_type}
    return {k: v for k, v in pairs.items() if v}

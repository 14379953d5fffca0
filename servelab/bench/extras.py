"""Which engine-specific benchmark extras apply to a target: ``servelab.engines.<engine>.bench_extras``.

Each such module gives ``request_fields()``, ``tokenize(probe, text, model)``,
``count_chat_tokens(probe, messages, model)``, ``ACCEPTS_TOKEN_IDS`` and ``SNAPSHOT_PATHS``; engines without
one use the generic OpenAI module.
"""

from __future__ import annotations

import importlib
from types import ModuleType


def extras_for(engine: str) -> ModuleType:
    try:
        return importlib.import_module(f"servelab.engines.{engine}.bench_extras")
    except ModuleNotFoundError:
        return importlib.import_module("servelab.engines.openai.bench_extras")

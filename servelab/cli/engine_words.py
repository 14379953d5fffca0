"""The words after `--` on `plan`, `predict` and `calibrate`: an engine's own flags, in its own spelling, read by
that engine's command-line reader into its Settings (`Planner.settings`; servelab/sizing/typed.py).

`servelab plan MODEL --engine vllm -- --max-num-seqs 64 --gpu-memory-utilization 0.85`. The reader also reads
the environment the engine itself would (vLLM's VLLM_CPU_KVCACHE_SPACE, llama.cpp's LLAMA_ARG_*): this process's,
and `NAME=value` words among the words, as a shell would put them before the engine's command.
"""

from __future__ import annotations

import os
import re
from typing import Any

from servelab.engines import registry
from servelab.errors import ConfigError

ASSIGNMENT = re.compile(r"[A-Z_][A-Z0-9_]*=")  # an environment variable for the engine (VAR=value)


def split_model(model: str | None, words: list[str]) -> tuple[str | None, list[str]]:
    """MODEL and the engine's words: without MODEL before `--`, click hands the first word after it to MODEL; a
    model name never starts with '-', so such a word is the engine's."""
    if model is not None and model.startswith("-"):
        return None, [model, *words]
    return model, list(words)


def engine_settings(engine: str | None, words: list[str]) -> dict[str, Any]:
    """Each planned engine's own Settings by name (`engine`: the one named, None or "all": every planned engine),
    from `words` and this process's environment; words need one named engine."""
    if engine is None or engine.lower() == "all":
        if words:
            names = ", ".join(e.name for e in registry.planned())
            raise ConfigError(
                f"the words after -- ({' '.join(words)}) are one engine's flags: name it with --engine ({names})"
            )
        chosen = registry.planned()
    else:
        chosen = (registry.get_engine(engine, registry.planned()),)
    assigned = [w for w in words if ASSIGNMENT.match(w)]
    environment = {**os.environ, **dict(w.split("=", 1) for w in assigned)}
    words = [w for w in words if w not in assigned]
    settings: dict[str, Any] = {}
    for e in chosen:
        reader = e.planner.settings if e.planner is not None else None
        if reader is None:
            if words:
                raise ConfigError(f"{e.label} takes no flags of its own after --")
            continue
        settings[e.name] = reader(words, environment)
    return settings


def flag_lines() -> list[str]:
    """Each planned engine's flags after `--`, one line per engine, from its Settings (`--help`; docs/cli.md says
    what each sets)."""
    from servelab.sizing.typed import settings_flags

    lines = []
    for e in registry.planned():
        if e.planner is None or e.planner.settings is None:
            continue
        flags = settings_flags(e.planner.settings_type)
        if flags:
            lines.append(f"{e.name}: " + ", ".join(flag for _, flag, _ in flags))
    return lines

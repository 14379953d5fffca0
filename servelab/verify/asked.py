"""What was asked of a server: ``--expect key=value``, an engine command line, or a saved plan.

Everything becomes an ``Asked``: verify keys (``EXPECT_KEYS``) with values, where each came from, and
the engine's parsed command line so the diff can name the flag that caused a mismatch.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from servelab.engines import registry
from servelab.errors import ConfigError
from servelab.plan.io import load_plan
from servelab.results.configs import Asked
from servelab.verify.command import EngineCommand, cmdlines, read_command

EXPECT_KEYS = {
    "context": "tokens one request may use (llama.cpp: per slot; sglang: context_length; vLLM: max_model_len)",
    "slots": "parallel sequences (llama.cpp -np; sglang --max-running-requests; vLLM --max-num-seqs)",
    "kv_dtype": "KV cache data type (f16, q8_0, fp8, fp8_e5m2 …)",
    "model": "served model name or file",
    "max_total_tokens": "KV pool capacity in tokens, all requests together",
    "tp_size": "tensor-parallel size",
    "speculative": "speculative decoding on (true/false)",
}
_INT_KEYS = ("context", "slots", "max_total_tokens", "tp_size")


def parse_expect(items: list[str] | tuple[str, ...]) -> Asked:
    """``["context=8192", "kv_dtype=q8_0"]`` → Asked. Unknown keys and bad numbers are ConfigError."""
    values: dict[str, Any] = {}
    for item in items:
        key, eq, text = item.partition("=")
        key = key.strip().replace("-", "_")
        if not eq or not text.strip():
            raise ConfigError(f"--expect {item!r} is not key=value; keys: {', '.join(EXPECT_KEYS)}")
        if key not in EXPECT_KEYS:
            raise ConfigError(f"--expect: unknown key {key!r}; valid keys: {', '.join(EXPECT_KEYS)}")
        values[key] = _expect_value(key, text.strip())
    return Asked(values, dict.fromkeys(values, "--expect"))


def _expect_value(key: str, text: str) -> Any:
    if key in _INT_KEYS:
        try:
            number = int(text.replace("_", ""))
        except ValueError:
            raise ConfigError(f"--expect {key}= needs a whole number, got {text!r}") from None
        if number < 1:
            raise ConfigError(f"--expect {key}= needs a positive whole number, got {number}")
        return number
    if key == "speculative":
        if text.lower() not in ("true", "false", "on", "off", "1", "0", "yes", "no"):
            raise ConfigError(f"--expect speculative= needs true or false, got {text!r}")
        return text.lower() in ("true", "on", "1", "yes")
    return text


def from_command(
    command: str | list[str],
    *,
    engine: str | None = None,
    source: str = "--cmd",
    environment: dict[str, str] | None = None,
) -> Asked:
    """Asked from an engine command line (and its environment); ConfigError for one that launches no engine.

    ``engine`` is used for bare flags (a command line starting with ``-``).
    """
    return from_engine_command(
        read_command(command, source=source), engine=engine, source=source, environment=environment
    )


def from_engine_command(
    command: EngineCommand,
    *,
    engine: str | None = None,
    source: str = "--cmd",
    environment: dict[str, str] | None = None,
) -> Asked:
    """Asked from a command already taken apart (``read_command``); ``engine`` for bare flags."""
    name = command.engine or engine
    argv = list(command.argv)
    readers = cmdlines()
    if name not in readers:
        raise ConfigError(
            f"{source}: bare flags {shlex.join(argv[:3])!r} need an engine, and {name or 'none'} "
            "answers; give the full command line (llama-server …, vllm serve …)"
        )
    module = readers[name]
    launch = module.parse(argv, {**(environment or {}), **command.environment})
    values = module.expectations(launch)
    if not values:
        raise ConfigError(
            f"{source}: {shlex.join(argv[:3])!r} sets nothing verify can check for {name} "
            "(context, slots, KV dtype, model …); pass the engine's full command line"
        )
    return Asked(values, dict.fromkeys(values, source), name, launch)


def from_plan(path: Path) -> Asked:
    """Asked from a saved plan (``servelab plan --save``): plans[0].engine/context/kv_dtype/slots/model/command.

    A hand-written plan needs only what it expects (``{"plans": [{"context": 8192}]}``); one whose
    plans[0] names nothing verify can check is a ConfigError.
    """
    first = load_plan(path, flag="--plan", required=()).plans[0]
    engine = _engine_name(first.engine)
    asked = Asked(engine=engine)
    command = list(first.command) if isinstance(first.command, tuple) else first.command
    if command and engine in cmdlines():
        asked = from_command(command, engine=engine, source="--plan")
    # the plan's "model" is a display name (a GGUF's general.name); the command's -m / --model-path says what loads
    planned = {"context": first.context, "slots": first.slots, "kv_dtype": first.kv_dtype}
    if "model" not in asked.values:
        planned["model"] = first.model
    values = {k: v for k, v in planned.items() if v is not None}
    if not values and not asked.values and engine is None:
        raise ConfigError(
            f"--plan {path}: plans[0] gives nothing verify can check "
            "(engine, context, slots, kv_dtype, model or command)"
        )
    return asked.merged(Asked(values, dict.fromkeys(values, "--plan"), engine))


def _engine_name(value: str | None) -> str | None:
    found = registry.find_engine(value or "")
    return found.name if found is not None and found.cmdline is not None else None

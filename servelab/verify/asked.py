"""What was asked of a server: ``--expect key=value``, an engine command line, or a saved plan.

Everything becomes an ``Asked``: verify keys (``EXPECT_KEYS``) with values, where each came from, and
the engine's parsed command line so the diff can name the flag that caused a mismatch.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from servelab.engines.llamacpp import cmdline as llamacpp_cmdline
from servelab.engines.sglang import cmdline as sglang_cmdline
from servelab.engines.vllm import cmdline as vllm_cmdline
from servelab.errors import ConfigError

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
CMDLINES = {"llamacpp": llamacpp_cmdline, "sglang": sglang_cmdline, "vllm": vllm_cmdline}


@dataclass(frozen=True)
class Asked:
    """Expectations keyed by EXPECT_KEYS; ``sources[key]`` says where each came from."""

    values: dict[str, Any] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    engine: str | None = None
    launch: Any = None  # the engine's parsed command line (LlamaCppLaunch, SglangLaunch, VllmLaunch)

    def merged(self, later: Asked) -> Asked:
        """``later`` wins key by key; the launch and engine are kept from whichever has them."""
        return Asked(
            {**self.values, **later.values},
            {**self.sources, **later.sources},
            later.engine or self.engine,
            later.launch if later.launch is not None else self.launch,
        )


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


def engine_of_command(argv: list[str]) -> str | None:
    """The engine a command line runs, from its program words; None for bare flags."""
    return next((name for name, module in CMDLINES.items() if module.recognises(argv)), None)


def from_command(
    command: str | list[str],
    *,
    engine: str | None = None,
    source: str = "--cmd",
    environment: dict[str, str] | None = None,
) -> Asked:
    """Asked from an engine command line (and its environment). ``engine`` is used when the words name none."""
    try:
        argv = shlex.split(command) if isinstance(command, str) else [str(word) for word in command]
    except ValueError as exc:  # an unclosed quote
        raise ConfigError(f"{source}: cannot split the command line ({exc}); check its quotes") from exc
    name = engine_of_command(argv) or engine
    if name not in CMDLINES:
        choices = "llama-server …, python -m sglang.launch_server …, vllm serve …"
        raise ConfigError(f"{source}: cannot tell which engine runs {shlex.join(argv[:3])!r}; expected {choices}")
    module = CMDLINES[name]
    launch = module.parse(argv, environment)
    values = module.expectations(launch)
    if not values:
        raise ConfigError(f"{source}: {shlex.join(argv[:3])!r} sets nothing verify can check for {name} "
                          "(context, slots, KV dtype, model …); pass the engine's full command line")  # fmt: skip
    return Asked(values, dict.fromkeys(values, source), name, launch)


def from_plan(path: Path) -> Asked:
    """Asked from a saved plan (``servelab plan --save``): plans[0].engine/context/kv_dtype/slots/command."""
    plan = _read_json(path).get("plans") or []
    if not plan or not isinstance(plan[0], dict):
        raise ConfigError(f"--plan {path}: no plans[0] in the file; save one with `servelab plan … --save FILE`")
    first = plan[0]
    engine = _engine_name(first.get("engine"))
    asked = Asked(engine=engine)
    command = first.get("command") or first.get("argv")
    if command and engine in CMDLINES:
        asked = from_command(command, engine=engine, source="--plan")
    # the plan's "model" is a display name (a GGUF's general.name); the command's -m / --model-path says what loads
    keys = ("context", "slots", "kv_dtype") + (() if "model" in asked.values else ("model",))
    values = {k: first[k] for k in keys if first.get(k) is not None}
    return asked.merged(Asked(values, dict.fromkeys(values, "--plan"), engine))


def _engine_name(value: Any) -> str | None:
    text = str(value or "").lower().replace(".", "").replace("-", "").replace("_", "")
    return {"llamacpp": "llamacpp", "sglang": "sglang", "vllm": "vllm", "ollama": "ollama"}.get(text)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"--plan {path}: cannot read it ({exc.strerror})") from exc
    except json.JSONDecodeError as exc:
        raise ConfigError(f"--plan {path}: not JSON ({exc.msg} at line {exc.lineno})") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"--plan {path}: not a JSON text file (not UTF-8); save one with `servelab plan … --save FILE`") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"--plan {path}: expected a JSON object with a 'plans' list")
    return data

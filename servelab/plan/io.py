"""Read a saved plan (`servelab plan --json > FILE` or `--save FILE`) back as plain data.

The one reader of plan files for spec, verify and report: each way a file can fail to be a plan gives one
line that names the flag and the file. `read_json_object` is the part shared with other JSON inputs.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from servelab.errors import ConfigError
from servelab.plan.types import Plan

REQUIRED_PLAN_KEYS = ("engine", "quant", "context", "kv_dtype", "fits", "memory_bytes")
PLAN_ENTRY_KEYS = frozenset(f.name for f in dataclasses.fields(Plan))
PLAN_HINT = "save one with `servelab plan … --save FILE` (or --json > FILE)"


def read_json_object(path: str | Path, flag: str, hint: str) -> dict[str, Any]:
    """The JSON object in `path`; a one-line ConfigError "FLAG PATH: what is wrong; hint" otherwise."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{flag} {path}: no such file") from None
    except IsADirectoryError:
        raise ConfigError(f"{flag} {path}: is a directory, not a file; {hint}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{flag} {path}: not a JSON text file (not UTF-8); {hint}") from None
    except OSError as exc:
        raise ConfigError(f"{flag} {path}: cannot read it ({exc.strerror or exc})") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{flag} {path}: not JSON ({exc.msg} at line {exc.lineno}); {hint}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{flag} {path}: not a JSON object (it holds a {_json_kind(data)}); {hint}")
    return data


def _json_kind(value: object) -> str:
    names = {list: "list", str: "string", bool: "boolean", int: "number", float: "number", type(None): "null"}
    return names.get(type(value), type(value).__name__)


def load_plan(
    path: str | Path,
    *,
    flag: str = "--plan",
    required: Sequence[str] = REQUIRED_PLAN_KEYS,
    bare_entry: bool = False,
) -> dict[str, Any]:
    """The plan document at `path` as {"model", "gpu", "plans": [entry, …]}, every entry an object with
    the `required` fields. `bare_entry`: one plan entry on its own (no "plans" list) is read as a document
    of that one entry. Every problem is a one-line ConfigError naming `flag` and the file."""
    data = read_json_object(path, flag, PLAN_HINT)
    if bare_entry and "plans" not in data and PLAN_ENTRY_KEYS & data.keys():
        data = {"model": data.get("model"), "gpu": data.get("gpu"), "plans": [data]}
    plans = data.get("plans")
    if not isinstance(plans, list) or not plans:
        raise ConfigError(
            f"{flag} {path}: no plan entries (a non-empty 'plans' list of objects); {PLAN_HINT}"
        )
    for index, entry in enumerate(plans):
        if not isinstance(entry, dict):
            raise ConfigError(
                f"{flag} {path}: plans[{index}] is a {_json_kind(entry)}, not a plan entry (an object)"
            )
        missing = [key for key in required if key not in entry]
        if missing:
            raise ConfigError(f"{flag} {path}: plans[{index}] lacks {', '.join(missing)}; {PLAN_HINT}")
    return data

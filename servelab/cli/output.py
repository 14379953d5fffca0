"""Shared rendering helpers: JSON on stdout, progress and notes on stderr."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from enum import Enum
from pathlib import Path
from typing import Any

from rich.console import Console

PIPED_WIDTH = 200  # rich's 80 columns off a terminal would cut wide tables (their numbers too) when piped


def stdout_console() -> Console:
    """Results on stdout; piped into a file or a pager, tables keep their full width (COLUMNS still wins)."""
    piped = not sys.stdout.isatty() and "COLUMNS" not in os.environ
    return Console(file=sys.stdout, highlight=False, soft_wrap=True, width=PIPED_WIDTH if piped else None)


def stderr_console() -> Console:
    return Console(file=sys.stderr, highlight=False, soft_wrap=True)


def to_jsonable(value: Any) -> Any:
    """Dataclasses, enums, paths, tuples and sets into plain JSON values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [to_jsonable(v) for v in value]
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, Path):
        return str(value)
    return value


def print_json(value: Any) -> None:
    """Print one JSON document on stdout."""
    sys.stdout.write(json.dumps(to_jsonable(value), indent=2, sort_keys=False) + "\n")

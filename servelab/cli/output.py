"""Shared rendering helpers: JSON on stdout, progress and notes on stderr.

Every console here is inert to what it prints: markup and emoji codes are off unless a call asks for them
(``markup=True``, with outside values passed through ``rich.markup.escape``), and control characters in
any string or Text become visible escapes (servelab/inert.py) before rich lays them out.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from collections.abc import Iterable
from enum import Enum
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.segment import Segment
from rich.text import Text

from servelab.inert import inert_text

PIPED_WIDTH = 200  # rich's 80 columns off a terminal would cut wide tables (their numbers too) when piped


class InertConsole(Console):
    """A rich Console whose text cannot act on the terminal: no control character reaches the output."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**{"markup": False, "emoji": False, "highlight": False, **kwargs})

    def render_str(self, text: str, **kwargs: Any) -> Text:
        return super().render_str(inert_text(text), **kwargs)

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        # the net under Text objects built elsewhere: rich's own control segments (cursor moves) pass
        safe = (s if s.control else Segment(inert_text(s.text), s.style) for s in buffer)
        return super()._render_buffer(safe)


def stdout_console() -> Console:
    """Results on stdout; piped into a file or a pager, tables keep their full width (COLUMNS still wins)."""
    piped = not sys.stdout.isatty() and "COLUMNS" not in os.environ
    return InertConsole(file=sys.stdout, soft_wrap=True, width=PIPED_WIDTH if piped else None)


def stderr_console() -> Console:
    return InertConsole(file=sys.stderr, soft_wrap=True)


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

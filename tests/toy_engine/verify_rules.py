"""How a toy mismatch is explained."""

from __future__ import annotations

from typing import Any

from servelab.engines.verify_keys import LABELS
from servelab.engines.verify_keys import reported_value as reported

__all__ = ["LABELS", "UNREPORTED", "explain", "notes", "reported"]

UNREPORTED: dict[str, str] = {}


def explain(key: str, asked_value: Any, got_value: Any, asked: Any, got: Any) -> tuple[str, str] | None:
    if key == "context":
        return ("the toy server caps --ctx at its model's window", f"pass --ctx {got_value} or less")
    return None


def notes(got: Any) -> tuple[str, ...]:
    return ()

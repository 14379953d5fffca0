"""How a toy mismatch is explained."""

from __future__ import annotations

from typing import Any

from servelab.engines.verify_keys import LABELS as BASE_LABELS
from servelab.engines.verify_keys import reported_value
from tests.toy_engine.settings import ToyReported

LABELS = {**BASE_LABELS, "step_tokens": "tokens a step"}
UNREPORTED: dict[str, str] = {}


def reported(key: str, got: Any) -> Any:
    if key == "step_tokens":
        return got.own.step_tokens if isinstance(got.own, ToyReported) else None
    return reported_value(key, got)


def explain(key: str, asked_value: Any, got_value: Any, asked: Any, got: Any) -> tuple[str, str] | None:
    if key == "context":
        return ("the toy server caps --ctx at its model's window", f"pass --ctx {got_value} or less")
    if key == "step_tokens":
        return (
            "the toy server was started with another budget",
            f"restart it with --step-tokens {asked_value}",
        )
    return None


def notes(got: Any) -> tuple[str, ...]:
    return ()

"""Asked versus got, pure: each mismatch one line with its cause and its fix.

The cause and fix text for an engine's quirks live in that engine's ``verify_rules`` module; this module
only compares values and falls back to a plain sentence when an engine has nothing specific to say.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from servelab.engines import registry
from servelab.engines.base import VerifyRules
from servelab.model.dtypes import AUTO, same_dtype
from servelab.results.configs import Asked, EffectiveConfig

AT_LEAST_KEYS = ("max_total_tokens",)  # more than asked is fine


@dataclass(frozen=True)
class Mismatch:
    """One asked-versus-got difference. ``line`` is what a person reads."""

    key: str
    asked: Any
    got: Any
    why: str
    fix: str
    source: str = ""

    @property
    def line(self) -> str:
        return f"{self.why}; {self.fix}"


@dataclass(frozen=True)
class Unverified:
    """An expectation the server gives no way to check, and why."""

    key: str
    asked: Any
    reason: str


@dataclass(frozen=True)
class Diff:
    mismatches: tuple[Mismatch, ...]
    unverified: tuple[Unverified, ...]
    matched: tuple[str, ...]
    notes: tuple[str, ...] = ()


def rules_for(engine: str) -> VerifyRules:
    """The engine's verify rules; the plain OpenAI-compatible ones for an engine the registry does not know."""
    found = registry.find_engine(engine) or registry.fallback()
    return found.verify_rules


def diff(asked: Asked, got: EffectiveConfig) -> Diff:
    """Compare every asked key with what ``got`` reports."""
    rules = rules_for(got.engine)
    mismatches, unverified, matched = [], [], []
    for key, asked_value in asked.values.items():
        got_value = rules.reported(key, got)
        if got_value is None:
            reason = rules.UNREPORTED.get(key, f"the {got.engine} server does not report {key}")
            unverified.append(Unverified(key, asked_value, reason))
        elif values_match(key, asked_value, got_value):
            matched.append(key)
        else:
            mismatches.append(_mismatch(rules, key, asked_value, got_value, asked, got))
    return Diff(tuple(mismatches), tuple(unverified), tuple(matched), rules.notes(got))


def _mismatch(
    rules: VerifyRules, key: str, asked_value: Any, got_value: Any, asked: Asked, got: EffectiveConfig
) -> Mismatch:
    label = rules.LABELS.get(key, key)
    cause, fix = rules.explain(key, asked_value, got_value, asked, got) or (None, "check the launch flags")
    headline = f"{label} is {_show(got_value)}, not {_show(asked_value)}"
    why = f"{headline}: {cause}" if cause else headline
    return Mismatch(key, asked_value, got_value, why, fix, asked.sources.get(key, ""))


def values_match(key: str, asked_value: Any, got_value: Any) -> bool:
    """Equal in the key's own sense: dtype aliases, model paths by file name, capacities as minimums."""
    if key == "kv_dtype":
        return _dtype_matches(str(asked_value), str(got_value))
    if key == "model":
        return _model_matches(str(asked_value), str(got_value))
    if key in AT_LEAST_KEYS:
        return got_value >= asked_value
    return asked_value == got_value


def _dtype_matches(asked_value: str, got_value: str) -> bool:
    if same_dtype(got_value, AUTO):  # the model's own dtype: a 16-bit cache
        return any(same_dtype(asked_value, v) for v in (AUTO, "fp16", "bf16"))
    return same_dtype(asked_value, got_value)


def _model_matches(asked_value: str, got_value: str) -> bool:
    a, g = asked_value.lower().rstrip("/"), got_value.lower().rstrip("/")
    return a == g or os.path.basename(a) == os.path.basename(g) or a.endswith("/" + g) or g.endswith("/" + a)


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)

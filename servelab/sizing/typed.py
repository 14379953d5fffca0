"""The two value types every planned engine defines for itself (the contract: servelab/engines/base.py).

- Its **Settings**: a frozen dataclass of the knobs `plan` and `predict` may ask of it, each field made by
  `setting(flag, help)` so that the CLI reference lists them in the engine's own words; validated in its
  `__post_init__` (one-line ConfigErrors naming the flag); produced from its command line by its reader
  (`Planner.settings`). `PlanSettings.engine` carries it to the engine's planner.
- Its **Figures**: a frozen dataclass (subclass of `Figures`) of what its planner found and hands its scheduler;
  `to_json` writes it as a plan's `details`, `from_json` reads a saved plan's back (fields by name, a field's
  `json_name` where the saved key differs; None fields are figures this device does not have and are left out).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Self

from servelab.ranges import count
from servelab.sizing.typed_json import from_json

MAX_CONTEXT = 100_000_000  # tokens; beyond any model's context
MAX_PARALLEL = 65_536  # concurrent sequences


def check_whole(value: int | None, flag: str, low: int, high: int, unit: str) -> None:
    """A whole-number setting in range when given (None: the engine's default); one ConfigError line naming it."""
    if value is not None:
        count(value, flag, low, high, unit)


def setting(flag: str, help: str, default: Any = None) -> Any:
    """A Settings field: its default, the engine's own `flag` spelling and a one-line `help` (docs/cli.md)."""
    return dataclasses.field(default=default, metadata={"flag": flag, "help": help})


def settings_flags(settings_type: type) -> tuple[tuple[str, str, str], ...]:
    """(field, flag, help) of each knob a Settings type declares, in declaration order."""
    return tuple(
        (f.name, f.metadata["flag"], f.metadata["help"])
        for f in dataclasses.fields(settings_type)
        if "flag" in f.metadata
    )


def given(settings: object) -> dict[str, object]:
    """The fields of a Settings value that differ from its type's defaults (what was asked), by name."""
    default = type(settings)()
    return {
        f.name: getattr(settings, f.name)
        for f in dataclasses.fields(settings)  # type: ignore[arg-type]
        if getattr(settings, f.name) != getattr(default, f.name)
    }


@dataclass(frozen=True)
class SpeculativeWords:
    """Speculative decoding as an engine's own flags ask it (vLLM --speculative-config, sglang
    --speculative-algorithm …, llama.cpp -md --spec-draft-n-max), in servelab's terms: `method` mtp, eagle, ngram or
    draft, `num_tokens` drafted per step, `draft_path` the draft as the command names it (sizing/fit.py `Speculative`
    is this with the draft read)."""

    method: str
    num_tokens: int
    draft_path: str = ""


@dataclass(frozen=True)
class NoSettings:
    """An engine without knobs of its own."""


def json_name(name: str) -> Any:
    """A Figures field saved under another key (a figure named as the engine names it)."""
    return dataclasses.field(default=None, metadata={"json": name})


@dataclass(frozen=True)
class Figures:
    """Base of an engine's Figures: the JSON edge (`details` of a plan) both ways."""

    def to_json(self) -> dict[str, object]:
        return {
            f.metadata.get("json", f.name): getattr(self, f.name)
            for f in dataclasses.fields(self)
            if getattr(self, f.name) is not None
        }

    @classmethod
    def from_json(cls, data: Mapping[str, object], where: str = "details") -> Self:
        """The figures of a plan's `details` (keys it does not know are ignored); a missing figure or a wrong type
        is a one-line ConfigError naming it."""
        renamed = {
            f.name: data[f.metadata["json"]]
            for f in dataclasses.fields(cls)
            if "json" in f.metadata and f.metadata["json"] in data
        }
        return from_json(cls, {**data, **renamed}, where)


@dataclass(frozen=True)
class NoFigures(Figures):
    """An engine whose planner hands nothing on."""

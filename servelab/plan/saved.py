"""A plan as its readers (spec, verify, report) see it: what they use, each field None when the file omits it.

Saved plans are complete `Plan`s, but hand-written ones are not (`{"plans": [{"context": 8192}]}` is a
valid plan for verify), so a missing field stays distinguishable from a zero. `saved_plan` builds one from
a `Plan` or from a JSON entry, by the same typed reader; a wrong type is a ConfigError naming the field.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from servelab.sizing.typed_json import from_json
from servelab.sizing.types import Plan, PlannedCard


@dataclass(frozen=True, kw_only=True)
class SavedMemory:
    """`memory_bytes` of a plan entry, per GPU in bytes (see `MemoryBytes`)."""

    weights: int | None = None
    kv_cache: int | None = None
    recurrent_state: int | None = None
    activations: int | None = None
    runtime: int | None = None
    total: int | None = None
    capacity: int | None = None
    weights_text: int | None = None
    weights_mtp: int | None = None


@dataclass(frozen=True)
class SavedCeilings:
    """`decode_ceiling_tok_s` of a plan entry (see `DecodeCeilings`)."""

    short: float | None = None
    full_context: float | None = None
    short_context: int | None = None
    bound: str | None = None  # "memory" when absent


@dataclass(frozen=True)
class SavedBatchPoint:
    """One row of `decode_batch_tok_s`: a row needs both figures."""

    batch: int
    aggregate_tok_s: float


@dataclass(frozen=True, kw_only=True)
class SavedPlan:
    engine: str | None = None
    quant: str | None = None
    context: int | None = None
    kv_dtype: str | None = None
    slots: int | None = None
    context_served: int | None = None
    model: str | None = None  # a display name (a GGUF's general.name)
    gpu: str | None = None
    fits: bool | None = None
    fits_with: tuple[str, ...] | None = (
        None  # the flags that make the asked launch fit (plans before it: None)
    )
    command: tuple[str, ...] | str | None = None  # a hand-written plan may give one shell-quoted string
    memory_bytes: SavedMemory | None = None
    decode_ceiling_tok_s: SavedCeilings | None = None
    decode_batch_tok_s: tuple[SavedBatchPoint, ...] | None = None
    tensor_parallel: int | None = None  # GPUs one engine instance spans
    card: PlannedCard | None = None  # the card's figures as planned (--vram/--bandwidth/--tflops applied)


@dataclass(frozen=True)
class PlanDocument:
    """A plan file: `servelab plan --json` output (`PlanSet`) or a hand-written one; never without entries."""

    model: str | None
    gpu: str | None
    plans: tuple[SavedPlan, ...]


def saved_plan(source: Plan | Mapping[str, object], where: str = "") -> SavedPlan:
    """What readers use of a `Plan`, or of a plan entry read from JSON ("argv" is read as "command")."""
    data = dataclasses.asdict(source) if isinstance(source, Plan) else source
    if not data.get("command") and data.get("argv"):
        data = {**data, "command": data["argv"]}
    return from_json(SavedPlan, data, where)

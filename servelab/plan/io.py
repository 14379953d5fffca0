"""Read a saved plan (`servelab plan --json > FILE` or `--save FILE`) back as a typed `PlanDocument`.

The one reader of plan files for spec, verify and report: each way a file can fail to be a plan gives one
line that names the flag and the file. `read_json_object` is the part shared with other JSON inputs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from servelab.errors import ConfigError
from servelab.plan.saved import PlanDocument, saved_plan
from servelab.sizing.typed_json import from_json, json_kind
from servelab.sizing.types import Plan
from servelab.userfiles import UserFile

REQUIRED_PLAN_KEYS = ("engine", "quant", "context", "kv_dtype", "fits", "memory_bytes")
PLAN_ENTRY_KEYS = frozenset(f.name for f in dataclasses.fields(Plan))
MAX_JSON_FILE_BYTES = 64 << 20  # a saved plan, doctor or spec JSON (a plan with every candidate is ~1 MB)
PLAN_HINT = "save one with `servelab plan … --save FILE` (or --json > FILE)"


def read_json_object(path: str | Path, flag: str, hint: str) -> dict[str, Any]:
    """The JSON object in `path`; a one-line ConfigError "FLAG PATH: what is wrong; hint" otherwise."""
    data = UserFile.named(path, flag, hint).load_json(MAX_JSON_FILE_BYTES)
    if not isinstance(data, dict):
        raise ConfigError(f"{flag} {path}: not a JSON object (it holds {json_kind(data)}); {hint}")
    return data


def load_plan(
    path: str | Path,
    *,
    flag: str = "--plan",
    required: Sequence[str] = REQUIRED_PLAN_KEYS,
    bare_entry: bool = False,
) -> PlanDocument:
    """The plan document at `path`, every entry with the `required` fields. `bare_entry`: one plan entry on
    its own (no "plans" list) is read as a document of that one entry. Every problem is a one-line
    ConfigError naming `flag` and the file."""
    data = read_json_object(path, flag, PLAN_HINT)
    return plan_document(data, where=f"{flag} {path}", required=required, bare_entry=bare_entry)


def plan_document(
    data: Mapping[str, object],
    *,
    where: str = "plan",
    required: Sequence[str] = (),
    bare_entry: bool = False,
) -> PlanDocument:
    """A parsed plan file's JSON object as a typed document; `where` begins every message ("--plan FILE")."""
    if bare_entry and "plans" not in data and PLAN_ENTRY_KEYS & data.keys():
        data = {"model": data.get("model"), "gpu": data.get("gpu"), "plans": [data]}
    plans = data.get("plans")
    if not isinstance(plans, list) or not plans:
        raise ConfigError(f"{where}: no plan entries (a non-empty 'plans' list of objects); {PLAN_HINT}")
    for index, entry in enumerate(plans):
        if not isinstance(entry, dict):
            raise ConfigError(f"{where}: plans[{index}] is {json_kind(entry)}, not a plan entry (an object)")
        missing = [key for key in required if key not in entry]
        if missing:
            raise ConfigError(f"{where}: plans[{index}] lacks {', '.join(missing)}; {PLAN_HINT}")
    header = from_json(_DocumentHeader, data, where=f"{where}:")
    entries = tuple(saved_plan(entry, f"{where}: plans[{i}]") for i, entry in enumerate(plans))
    return PlanDocument(header.model, header.gpu, entries)


@dataclasses.dataclass(frozen=True)
class _DocumentHeader:
    model: str | None = None
    gpu: str | None = None

"""What stored measured runs say about the server they ran against: one engine, its model, slots and context.

`servelab calibrate` fits one machine x engine x weight format, so every run (and every target in it) must be
one engine; predicted runs are refused (a fit to the emulator's own output says nothing new about a machine).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from servelab.errors import ConfigError
from servelab.results.records import RequestRecord
from servelab.store.models import StoredRun

SLOTS_MOMENT = "before /slots"  # llama.cpp's /slots, kept before each level (bench/target.py)


@dataclass(frozen=True, kw_only=True)
class MeasuredSetup:
    engine: str
    model: str | None  # the target's model as the server named it (a llama.cpp .gguf path, an HF dir)
    slots: int | None  # llama.cpp: the /slots the server listed
    context_per_slot: int | None
    records: tuple[RequestRecord, ...]
    run_ids: tuple[str, ...]
    engine_version: str | None = (
        None  # the release the server reported (its one release; None: unknown or several)
    )


def measured_setup(runs: Sequence[StoredRun], target: int | None = None) -> MeasuredSetup:
    """The engine, model and records of `runs`; one line when they are of different engines or predicted."""
    engines: dict[str, str] = {}
    models: set[object] = set()
    contexts: set[object] = set()
    slots: set[int | None] = set()
    versions: set[object] = set()
    records: list[RequestRecord] = []
    for run in runs:
        if run.meta.predicted is not None:
            raise ConfigError(f"run {run.info.id} is a prediction; calibrate on measured runs")
        for t in run.targets:
            if target is not None and t.index != target:
                continue
            engines.setdefault(t.engine, run.info.id)
            models.add(t.info.model)
            contexts.add(t.info.context_per_slot)
            versions.add(t.info.version)
            slots.update(
                _slot_count(s.text)
                for s in run.snapshots
                if s.target_index == t.index and s.moment == SLOTS_MOMENT
            )
            records.extend(r for r in run.requests if r.target_index == t.index)
    if len(engines) > 1:
        shown = ", ".join(f"{e} (run {r})" for e, r in engines.items())
        raise ConfigError(f"the runs are of different engines: {shown}; calibrate one engine at a time")
    if not engines:
        raise ConfigError("the runs have no target to calibrate on (check --target)")
    counts = [n for n in slots if n is not None]
    model, context, version = _one(models), _one(contexts), _one(versions)
    return MeasuredSetup(
        engine=next(iter(engines)),
        model=model if isinstance(model, str) else None,
        slots=max(counts) if counts else None,
        context_per_slot=context if isinstance(context, int) else None,
        records=tuple(records),
        run_ids=tuple(r.info.id for r in runs),
        engine_version=version if isinstance(version, str) else None,
    )


def _one(values: set[object]) -> object | None:
    values = {v for v in values if v is not None}
    return next(iter(values)) if len(values) == 1 else None


def _slot_count(text: str) -> int | None:
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return len(data) if isinstance(data, list) and data else None

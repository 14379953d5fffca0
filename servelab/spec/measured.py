"""Measured inputs for the verdict: single-stream decode speed of stored bench runs, draft cost from a plan."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from servelab.bench.records import RequestRecord
from servelab.errors import ConfigError

SINGLE_STREAM_LEVEL = "c=1"
_DRAFT_KEYS = ("draft_weight_bytes", "draft_bytes")
_TARGET_KEYS = ("weight_bytes", "target_weight_bytes", "target_bytes")


def per_stream_tok_s(record: RequestRecord) -> float | None:
    """Decode speed of one request: tokens after the first over the time after the first token."""
    if record.status != "ok" or record.first_token_ns is None or not record.output_tokens or record.output_tokens < 2:
        return None
    seconds = (record.end_ns - record.first_token_ns) / 1e9
    return (record.output_tokens - 1) / seconds if seconds > 0 else None


def run_single_stream_tok_s(db_path: Path | None, run_id: str) -> float:
    """Median per-stream decode tok/s of a stored run's measured requests at concurrency 1."""
    from servelab.store import Store  # the store is optional until a run is asked for

    with Store.open(db_path) as store:
        run = store.load_run(run_id)
    speeds = [
        s
        for r in run.requests
        if r.level == SINGLE_STREAM_LEVEL and r.phase == "measure" and (s := per_stream_tok_s(r)) is not None
    ]
    if not speeds:
        raise ConfigError(f"run {run_id} has no successful measured requests at {SINGLE_STREAM_LEVEL}; bench with -c 1")
    return statistics.median(speeds)


def draft_cost_from_plan(path: Path) -> float:
    """c = draft bytes / target bytes read per token, from a plan JSON (decode is bandwidth-bound)."""
    try:
        plan = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"cannot read plan {path}: {exc}") from exc
    draft, target = _find_number(plan, _DRAFT_KEYS), _find_number(plan, _TARGET_KEYS)
    if draft is None or not target:
        raise ConfigError(
            f"plan {path} has no draft and target sizes ({'/'.join(_DRAFT_KEYS)} and {'/'.join(_TARGET_KEYS)}); "
            "pass --draft-cost C instead"
        )
    return draft / target


def _find_number(value: object, keys: tuple[str, ...]) -> float | None:
    """First numeric value under any of ``keys``, searching nested mappings breadth-first."""
    queue = [value]
    while queue:
        item = queue.pop(0)
        if isinstance(item, dict):
            for key in keys:
                if isinstance(item.get(key), int | float) and not isinstance(item.get(key), bool):
                    return float(item[key])
            queue += [v for v in item.values() if isinstance(v, dict)]
    return None

"""Measured inputs for the verdict: single-stream decode speed of stored bench runs, draft cost from plans."""

from __future__ import annotations

import statistics
from pathlib import Path

from servelab.bench.metrics import decode_tok_s
from servelab.errors import ConfigError
from servelab.plan.io import load_plan

SINGLE_STREAM_LEVEL = "c=1"


def run_single_stream_tok_s(db_path: Path | None, run_id: str) -> float:
    """Median per-stream decode tok/s (bench's definition, 1000 / TPOT) of a run's measured requests at c=1."""
    from servelab.store import Store  # the store is optional until a run is asked for

    with Store.open(db_path) as store:
        run = store.load_run(run_id)
    speeds = [
        s
        for r in run.requests
        if r.level == SINGLE_STREAM_LEVEL and r.phase == "measure" and r.status == "ok"
        and (s := decode_tok_s(r)) is not None
    ]
    if not speeds:
        raise ConfigError(f"run {run_id} has no successful measured requests at {SINGLE_STREAM_LEVEL}; bench with -c 1")
    return statistics.median(speeds)


def draft_cost_from_plans(target_plan: Path, draft_plan: Path | None = None) -> tuple[float, str]:
    """Draft cost c from `servelab plan --json` documents (first plan of each), and how it was found.

    With a draft plan: target step time / draft step time = draft decode ceiling / target ceiling inverted,
    i.e. c = target ceiling tok/s / draft ceiling tok/s (short context). Without: the target plan's MTP
    weights over its text weights (decode is bandwidth-bound). The lm_head pass an MTP draft also makes is
    not in that ratio; give --draft-cost to include it.
    """
    target = load_plan(target_plan)["plans"][0]
    if draft_plan is not None:
        draft = load_plan(draft_plan)["plans"][0]
        target_tok_s, draft_tok_s = _short_ceiling(target, target_plan), _short_ceiling(draft, draft_plan)
        return target_tok_s / draft_tok_s, f"plans: decode ceilings {target_tok_s:g} / {draft_tok_s:g} tok/s"
    memory = target.get("memory_bytes") or {}
    mtp, text = memory.get("weights_mtp") or 0, memory.get("weights_text") or 0
    if mtp <= 0 or text <= 0:
        raise ConfigError(
            f"plan {target_plan} has no draft (MTP) weights; pass --draft-plan DRAFT.json (a plan of the draft "
            "model) or --draft-cost C"
        )
    return mtp / text, f"plan: MTP weights / text weights ({mtp:,} / {text:,} bytes)"


def _short_ceiling(plan: dict, path: Path) -> float:
    ceiling = (plan.get("decode_ceiling_tok_s") or {}).get("short")
    if not isinstance(ceiling, int | float) or ceiling <= 0:
        raise ConfigError(f"plan {path} has no positive decode_ceiling_tok_s.short")
    return float(ceiling)

"""Measured inputs for the verdict: single-stream decode speed of stored bench runs, draft cost from plans."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from servelab.bench.summary import summarize_records
from servelab.errors import ConfigError
from servelab.plan.io import load_plan
from servelab.plan.saved import SavedMemory, SavedPlan
from servelab.results.level_key import Level

if TYPE_CHECKING:
    from servelab.store import StoredRun

SINGLE_STREAM = Level.closed(1)


def run_single_stream_tok_s(db_path: Path | None, run_id: str) -> float:
    """The per-stream decode tok/s bench reports for a run's c=1 level (p50 of 1000 / TPOT, repeats pooled)."""
    from servelab.store import Store  # the store is optional until a run is asked for

    with Store.open(db_path, must_exist=True) as store:
        run = store.load_run(run_id)
    return single_stream_tok_s(run)


def single_stream_tok_s(run: StoredRun) -> float:
    """The c=1 level's median per-stream tok/s as bench stored it (runs stored before the store kept level
    statistics: bench's own `summarize_level` of the records, so spec cannot count differently)."""
    records = [r for r in run.requests if r.level == SINGLE_STREAM.label]
    targets = sorted(
        {r.target_index for r in records} | {t for t, lv in run.level_stats if lv == SINGLE_STREAM}
    )
    if len(targets) > 1:
        raise ConfigError(
            f"run {run.id} benched {len(targets)} targets at {SINGLE_STREAM}; "
            "give runs of one target each (bench the baseline and the speculative server apart)"
        )
    stored = run.level_stats.get((targets[0], SINGLE_STREAM)) if targets else None
    stats = stored or summarize_records(records, SINGLE_STREAM)
    tok_s = stats.per_stream_tok_s.p50
    if tok_s is None:
        raise ConfigError(
            f"run {run.id} has no successful measured requests at {SINGLE_STREAM}; bench with -c 1"
        )
    return tok_s


def draft_cost_from_plans(target_plan: Path, draft_plan: Path | None = None) -> tuple[float, str]:
    """Draft cost c from `servelab plan --json` documents (first plan of each), and how it was found.

    With a draft plan: target step time / draft step time = draft decode ceiling / target ceiling inverted,
    i.e. c = target ceiling tok/s / draft ceiling tok/s (short context). Without: the target plan's MTP
    weights over its text weights (decode is bandwidth-bound). The lm_head pass an MTP draft also makes is
    not in that ratio; give --draft-cost to include it.
    """
    target = load_plan(target_plan, flag="--plan").plans[0]
    if draft_plan is not None:
        draft = load_plan(draft_plan, flag="--draft-plan").plans[0]
        target_tok_s = _short_ceiling(target, f"--plan {target_plan}")
        draft_tok_s = _short_ceiling(draft, f"--draft-plan {draft_plan}")
        return target_tok_s / draft_tok_s, f"plans: decode ceilings {target_tok_s:g} / {draft_tok_s:g} tok/s"
    memory = target.memory_bytes or SavedMemory()
    mtp, text = memory.weights_mtp or 0, memory.weights_text or 0
    if mtp <= 0 or text <= 0:
        raise ConfigError(
            f"--plan {target_plan}: plans[0] has no draft (MTP) weights; pass --draft-plan DRAFT.json (a plan of the draft "
            "model) or --draft-cost C"
        )
    return mtp / text, f"plan: MTP weights / text weights ({mtp:,} / {text:,} bytes)"


def _short_ceiling(plan: SavedPlan, where: str) -> float:
    ceiling = plan.decode_ceiling_tok_s.short if plan.decode_ceiling_tok_s else None
    if ceiling is None or ceiling <= 0:
        raise ConfigError(f"{where}: plans[0] has no positive decode_ceiling_tok_s.short")
    return ceiling

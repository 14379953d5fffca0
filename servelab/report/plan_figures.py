"""What one plan entry gives the bill (ceilings, planned context and memory), and which entry holds each engine.

Pure. A plan document may hold one entry per engine (the demo plans llama.cpp and vLLM for this machine), so
each engine/configuration of the bill is measured against the entry of its own engine: `plans_for` picks it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from servelab.engines import registry
from servelab.plan.saved import PlanDocument, SavedCeilings, SavedMemory, SavedPlan


@dataclass(frozen=True)
class PlanFigures:
    """The figures of one plan entry the bill holds measurements against; every one None without a plan."""

    plan: SavedPlan | None

    @property
    def ceilings(self) -> SavedCeilings:
        return (self.plan.decode_ceiling_tok_s if self.plan else None) or SavedCeilings()

    @property
    def ceiling_short_tok_s(self) -> float | None:
        return self.ceilings.short

    @property
    def ceiling_full_tok_s(self) -> float | None:
        return self.ceilings.full_context

    @property
    def short_context_tokens(self) -> int:
        """The context the plan's "short" ceiling is for (0 when the plan does not say)."""
        value = self.ceilings.short_context
        return value if value is not None and value >= 0 else 0

    @property
    def batch_ceilings_tok_s(self) -> dict[int, float]:
        """The plan's aggregate decode ceiling per batch size (concurrency), where it gives one."""
        rows = (self.plan.decode_batch_tok_s if self.plan else None) or ()
        return {row.batch: row.aggregate_tok_s for row in rows}

    @property
    def planned_context(self) -> int | None:
        return self.plan.context if self.plan else None

    @property
    def memory(self) -> SavedMemory | None:
        return self.plan.memory_bytes if self.plan else None

    @property
    def planned_total_bytes(self) -> int | None:
        return self.memory.total if self.memory else None

    @property
    def gpus_per_engine(self) -> int | None:
        """GPUs one engine spans (the plan's tensor parallel); None without a plan that says."""
        tp = self.plan.tensor_parallel if self.plan else None
        return tp if isinstance(tp, int) and tp > 0 else None


def _engine_key(name: str | None) -> str | None:
    """The registry name for any spelling (the name itself when unknown); None for no name."""
    return registry.registry_name(name) if name else None


def _first_fitting(entries: Sequence[SavedPlan]) -> SavedPlan | None:
    fitting = [p for p in entries if p.fits is not False] or list(entries)
    return fitting[0] if fitting else None


def pick_plan(plan_doc: PlanDocument | None, engines: tuple[str, ...]) -> SavedPlan | None:
    """The one entry for a document held against runs as a whole: the first that fits (an entry that does not
    say is taken to fit), preferring the first run's engine."""
    if plan_doc is None:
        return None
    fitting = [p for p in plan_doc.plans if p.fits is not False] or list(plan_doc.plans)
    first = _engine_key(engines[0]) if engines else None
    preferred = [p for p in fitting if first and _engine_key(p.engine) == first]
    candidates = preferred or fitting
    return candidates[0] if candidates else None


def plans_for(plan_doc: PlanDocument | None, engines: Sequence[str]) -> tuple[SavedPlan | None, ...]:
    """Each engine's own entry: the first (fitting) one of its engine, else one that names no engine. A
    document that names none of the bill's engines holds them all (the plan was made for the served model
    under another name, e.g. the OpenAI-compatible fallback); otherwise an engine without an entry has no
    plan, since another engine's ceiling is not its own."""
    if plan_doc is None:
        return tuple(None for _ in engines)
    keys = [_engine_key(e) for e in engines]
    named = {_engine_key(p.engine) for p in plan_doc.plans} - {None}
    if not named & set(keys):
        whole = pick_plan(plan_doc, tuple(engines))
        return tuple(whole for _ in engines)
    unnamed = _first_fitting([p for p in plan_doc.plans if not p.engine])
    return tuple(
        _first_fitting([p for p in plan_doc.plans if _engine_key(p.engine) == key]) or unnamed for key in keys
    )

"""Ranking and the Pareto front (pure): goodput per GPU up, p99 TTFT and TPOT down, cost per million output tokens
down (when priced).

With one price per GPU-hour the cost is the GPUs' price over the tokens they make, so it falls exactly as
goodput per GPU rises; it is carried as a figure and an objective all the same, so a power price (which need not
scale with goodput) can move it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from servelab.advise.judge import Judged

LATENCY_METRICS = ("ttft_ms", "tpot_ms")


def objectives(j: Judged) -> tuple[float, ...]:
    """Each objective as a number to minimise."""
    latencies = tuple(j.p99(m) or float("inf") for m in LATENCY_METRICS)
    cost = (j.cost_per_mtok,) if j.cost_per_mtok is not None else ()
    return (-j.per_gpu_tok_s, *latencies, *cost)


def dominates(a: Judged, b: Judged) -> bool:
    """`a` is at least as good as `b` on every objective and better on one."""
    return _dominates(objectives(a), objectives(b))


def ranked(judged: Sequence[Judged]) -> list[Judged]:
    """Those that meet the demand, best first: goodput per GPU, then cost, then p99 TTFT and TPOT; at the same figures
    the larger batch limit (headroom above this load), then the name."""
    meeting = [j for j in judged if j.meets]
    return sorted(
        meeting,
        key=lambda j: (
            -j.per_gpu_tok_s,
            j.cost_per_mtok or 0.0,
            *objectives(j)[1:3],
            -j.point.plan.slots,
            j.point.name,
        ),
    )


@dataclass(frozen=True)
class ParetoFront:
    """The front (in rank order) and, for every other configuration that meets the demand, the front member
    that dominates it."""

    front: tuple[Judged, ...]
    dominated: tuple[
        tuple[Judged, Judged], ...
    ]  # (loser, the best-ranked front member dominating or tying it)


def pareto(order: Sequence[Judged]) -> ParetoFront:
    """The non-dominated configurations of `order` (ranked), each other one with who beats it; of several with the
    same figures (a batch limit the load never reaches) only the best-ranked is on the front, the others tie."""
    scores = [objectives(j) for j in order]  # once each: advise's rescreen runs this after every wave
    free = _undominated(scores)
    front: list[int] = []
    for k, mine in enumerate(scores):
        if k in free and not any(scores[f] == mine for f in front):
            front.append(k)
    on_front = {id(order[f]) for f in front}
    losers = []
    for k, mine in enumerate(scores):
        if id(order[k]) not in on_front:
            winner = next(f for f in front if _dominates(scores[f], mine) or scores[f] == mine)
            losers.append((order[k], order[winner]))
    return ParetoFront(tuple(order[f] for f in front), tuple(losers))


def _undominated(scores: list[tuple[float, ...]]) -> set[int]:
    """The indices of the scores no other score dominates, kept as a window of the ones undominated so far (block
    nested loops): whatever dominates a score, some undominated score does too (dominance is transitive and the
    scores finitely many), so each score is checked against the window, not against all."""
    window: list[int] = []
    for k, mine in enumerate(scores):
        if any(_dominates(scores[w], mine) for w in window):
            continue
        window = [w for w in window if not _dominates(mine, scores[w])]
        window.append(k)
    return set(window)


def _dominates(oa: tuple[float, ...], ob: tuple[float, ...]) -> bool:
    """`dominates` on objectives already computed."""
    return all(x <= y for x, y in zip(oa, ob, strict=True)) and oa != ob

"""Ranking and the Pareto front with the error bands (pure): goodput per GPU up, p99 TTFT and TPOT down, cost per
million output tokens down (when priced), and meeting the SLOs at the bands' upper edge.

Each objective is a point prediction and its band (advise/bands.py; a figure without a band is its own band).
What a candidate can be counted on for is each band's pessimistic edge: the goodput's lower edge, the latencies'
and the cost's upper edge. Two candidates are told apart on an objective only beyond the error:

- priced by the same band (one engine, one source of figures, the same band factors), the model's error moves
  both alike (one engine's parameters are fitted from its rows alone, predict/stepmodel.py), so their order is
  the order of their predictions;
- priced by different bands (another engine, or the same one in another regime), the errors are separate, and
  one is better only where its whole band is better than the other's whole band.

`a` dominates `b` when `a`'s pessimistic edges are no worse than `b`'s on every objective and `a` is better
beyond the error on one; `b` is then off the front. Front members that no objective tells apart beyond the
error are a statistical tie, "within the error band of" the better-ranked. The rank is by what one can count
on: meeting the SLOs at the bands' upper edge first, then the goodput's lower edge, the cost's, TTFT's and TPOT's
upper edges; then the point goodput, the larger batch limit, the name. It extends the dominance (whoever
dominates ranks higher), and without bands it is the ranking by the predictions alone.

With one price per GPU-hour the cost is the GPUs' price over the tokens they make, so it falls exactly as
goodput per GPU rises; it is carried as a figure and an objective all the same, so a power price (which need not
scale with goodput) can move it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from servelab.advise.judge import Judged

LATENCY_METRICS = ("ttft_ms", "tpot_ms")
EXACT = "exact"  # the regime of a figure without error: meeting the SLOs at the bands' edge or not


def objectives(j: Judged) -> tuple[float, ...]:
    """Each objective's point prediction as a number to minimise (the screen's bounds compare with these)."""
    latencies = tuple(j.p99(m) or float("inf") for m in LATENCY_METRICS)
    cost = (j.cost_per_mtok,) if j.cost_per_mtok is not None else ()
    return (-j.per_gpu_tok_s, *latencies, *cost)


@dataclass(frozen=True)
class Scores:
    """A candidate's objectives, each to minimise: (not safe at its load, goodput negated, p99 TTFT, p99 TPOT[,
    cost]) as `low` (the band's optimistic edge), `counted` (its pessimistic edge) and `regime` (what prices its
    error: equal regimes share it)."""

    low: tuple[float, ...]
    counted: tuple[float, ...]
    regime: tuple[object, ...]


def scores(j: Judged) -> Scores:
    bands = j.bands
    who = (j.point.plan.engine, j.effective_source)
    unsafe = 0.0 if not j.over_band else 1.0
    entries: list[tuple[float, float, object]] = [(unsafe, unsafe, EXACT)]
    g = j.per_gpu_tok_s
    gf = bands.goodput if bands is not None else None
    entries.append((-g * (gf[1] if gf else 1.0), -g * (gf[0] if gf else 1.0), (*who, gf)))
    for metric in LATENCY_METRICS:
        value = j.p99(metric)
        tf = bands.tail(metric) if bands is not None else None
        entries.append((*_band(value, tf), (*who, tf)))
    if j.cost_per_mtok is not None:
        c = j.cost_per_mtok
        inverse = None if gf is None else (1 / gf[1], 1 / gf[0] if gf[0] > 0 else float("inf"))
        entries.append((*_band(c, inverse), (*who, gf)))
    low, counted, regime = zip(*entries, strict=True)
    return Scores(tuple(low), tuple(counted), tuple(regime))


def _band(value: float | None, factors: tuple[float, float] | None) -> tuple[float, float]:
    if value is None:
        return float("inf"), float("inf")
    if factors is None:
        return value, value
    return value * factors[0], value * factors[1]


def dominates(a: Judged, b: Judged) -> bool:
    """`a` is no worse than `b` on every objective's pessimistic edge and better beyond the error on one."""
    sa, sb = scores(a), scores(b)
    no_worse = all(x <= y for x, y in zip(sa.counted, sb.counted, strict=True))
    return no_worse and any(_better(sa, sb, k) for k in range(len(sa.counted)))


def _better(a: Scores, b: Scores, k: int) -> bool:
    """`a` better than `b` on objective `k` beyond the error: its prediction, priced by the same band; its whole
    band, priced by another."""
    if a.regime[k] == b.regime[k]:
        return a.counted[k] < b.counted[k]
    return a.counted[k] < b.low[k]


def ranked(judged: Sequence[Judged]) -> list[Judged]:
    """Those that meet the demand, best first by what they can be counted on for (the module's docstring)."""
    meeting = [j for j in judged if j.meets]

    def key(j: Judged) -> tuple[object, ...]:
        s = scores(j)
        cost = s.counted[4] if len(s.counted) > 4 else 0.0
        unsafe, goodput, ttft, tpot = s.counted[:4]
        return (unsafe, goodput, cost, ttft, tpot, -j.per_gpu_tok_s, -j.point.plan.slots, j.point.name)

    return sorted(meeting, key=key)


@dataclass(frozen=True)
class ParetoFront:
    """The front (in rank order); for every other configuration that meets the demand, who beats it; for each
    front member in a statistical tie with a better-ranked one, that one."""

    front: tuple[Judged, ...]
    dominated: tuple[
        tuple[Judged, Judged], ...
    ]  # (loser, the best-ranked front member dominating it or with the same figures; else its best dominator)
    ties: tuple[
        tuple[Judged, Judged], ...
    ] = ()  # (front member, the best-ranked one it is within the band of)

    def same_figures(self, loser: Judged, winner: Judged) -> bool:
        """`loser` lost for having `winner`'s very figures (a batch limit the load never reaches)."""
        return scores(loser) == scores(winner) and objectives(loser) == objectives(winner)


def pareto(order: Sequence[Judged]) -> ParetoFront:
    """The configurations of `order` (ranked) that none dominates; of several with the same figures (a batch limit
    the load never reaches) only the best-ranked is on the front. Every pair is weighed (bands make dominance
    intransitive: a candidate's dominator may itself be dominated), as arrays."""
    n = len(order)
    if n == 0:
        return ParetoFront((), ())
    all_scores = [scores(j) for j in order]
    width = max(len(s.counted) for s in all_scores)
    counted = np.array([_padded(s.counted, width) for s in all_scores])
    low = np.array([_padded(s.low, width) for s in all_scores])
    regime = _regime_ids([s.regime for s in all_scores], width)
    points = [objectives(j) for j in order]
    dominators: list[np.ndarray] = []
    for k in range(n):
        no_worse = (counted <= counted[k]).all(axis=1)
        same = regime == regime[k]
        better = np.where(same, counted < counted[k], counted < low[k]).any(axis=1)
        dominators.append(np.flatnonzero(no_worse & better))
    front: list[int] = []
    twin: dict[int, int] = {}
    for k in range(n):
        if len(dominators[k]):
            continue
        same_as = next((f for f in front if _same(all_scores, points, f, k)), None)
        if same_as is None:
            front.append(k)
        else:
            twin[k] = same_as
    on_front = set(front)
    losers = []
    for k in range(n):
        if k in on_front:
            continue
        if k in twin:
            winner = twin[k]
        else:
            beating = set(dominators[k].tolist())
            winner = next((f for f in front if f in beating), int(dominators[k][0]))
        losers.append((order[k], order[winner]))
    ties = []
    for pos, k in enumerate(front):
        apart = (counted[front[:pos]] < low[k]) | (counted[k] < low[front[:pos]])
        same = regime[front[:pos]] == regime[k]
        told = np.where(same, counted[front[:pos]] != counted[k], apart).any(axis=1)
        tied = [front[i] for i in np.flatnonzero(~told).tolist()]
        if tied:
            ties.append((order[k], order[tied[0]]))
    return ParetoFront(tuple(order[f] for f in front), tuple(losers), tuple(ties))


def _padded(values: tuple[float, ...], width: int) -> list[float]:
    return list(values) + [float("inf")] * (width - len(values))


def _regime_ids(regimes: list[tuple[object, ...]], width: int) -> np.ndarray:
    """Each objective's regime as an integer (equal regimes, equal integers)."""
    ids: dict[object, int] = {}
    rows = [[ids.setdefault(r, len(ids)) for r in row] + [-1] * (width - len(row)) for row in regimes]
    return np.array(rows)


def _same(all_scores: list[Scores], points: list[tuple[float, ...]], a: int, b: int) -> bool:
    return all_scores[a] == all_scores[b] and points[a] == points[b]


def point_front(judged: Sequence[Judged]) -> list[Judged]:
    """The candidates meeting the demand that none dominates on the point predictions alone (for the screen,
    which weighs only candidates without a band: there the two dominances are one)."""
    meeting = [j for j in judged if j.meets]
    scores_ = [objectives(j) for j in meeting]
    return [meeting[k] for k in sorted(_undominated(scores_))]


def _undominated(scores: list[tuple[float, ...]]) -> set[int]:
    """The indices of the scores no other score dominates, kept as a window of the ones undominated so far (block
    nested loops): whatever dominates a score, some undominated score does too (point dominance is transitive and
    the scores finitely many), so each score is checked against the window, not against all."""
    window: list[int] = []
    for k, mine in enumerate(scores):
        if any(_dominates(scores[w], mine) for w in window):
            continue
        window = [w for w in window if not _dominates(mine, scores[w])]
        window.append(k)
    return set(window)


def _dominates(oa: tuple[float, ...], ob: tuple[float, ...]) -> bool:
    """Point dominance on objectives already computed."""
    return all(x <= y for x, y in zip(oa, ob, strict=True)) and oa != ob

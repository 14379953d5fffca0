"""The cheap analytic screen before the emulator (pure): bounds from the roofline that no emulated level can beat.

Every token a request receives ends an engine step, and no step is shorter than the cheapest one the roofline
prices: one sequence, one new token, no context (`Roofline.step_s`, the emulator's own prices; two such
sequences as well, for a CPU engine whose batched passes take another path). So for every level of every load:

- TTFT, TPOT, ITL, chunk gap and E2E are each at least that step (`floor_s`): a candidate whose floor already
  breaks a bound misses the SLO at every load and is not emulated;
- one user receives at most one token per floor step, and a replica at most b tokens per step of b sequences
  (`batch_tok_s`), so a replica's goodput is at most the lesser of the users' and the batches' bound (open
  loop: the demand's rate x the longest output), a GPU's that over the tensor-parallel GPUs (a level's window
  counts the tokens stamped inside it: EDGE_SLACK allows for the ones at its edges), and the cost per million
  output tokens at least the price at that goodput.

A candidate whose best case (that goodput, those latencies, that cost) an emulated candidate meeting the demand
already dominates is dominated itself and is not emulated: it could not reach the front. Speculative candidates
emit several tokens in a step and are never screened. The screen cannot change the front
(tests/unit/test_advise_screen.py holds the fronts with and without it equal, and every emulated candidate
within its bounds).
"""

from __future__ import annotations

from dataclasses import dataclass

from servelab.advise.candidates import GridPoint
from servelab.advise.goal import Bound, Prices, cost_per_million
from servelab.predict.roofline import Roofline
from servelab.scheduling.core import Request, Sequence, Step, Work

EDGE_SLACK = 1.25  # a level's window may count one token more per user than its length / the floor step holds
ROUNDING_S = 1e-9
MAX_BATCH = 4096  # batch sizes priced for the replica's bound; beyond, the users' bound alone  # token stamps are whole nanoseconds


@dataclass(frozen=True)
class Best:
    """A candidate's best case: no level it runs does better on any of these."""

    floor_s: float  # the cheapest step: a lower bound of every latency of every request
    per_gpu_tok_s: float  # goodput per GPU, an upper bound
    cost_per_mtok: float | None  # a lower bound (None: no price)

    def objectives(self) -> tuple[float, ...]:
        """As rank.objectives orders a Judged's: goodput per GPU (negated), p99 TTFT, p99 TPOT, cost."""
        ms = self.floor_s * 1000
        cost = (self.cost_per_mtok,) if self.cost_per_mtok is not None else ()
        return (-self.per_gpu_tok_s, ms, ms, *cost)


def floor_step_s(roofline: Roofline, sequences: int = 1) -> float:
    """The shortest step of `sequences` sequences the emulator can price: one new token each, no context (one
    sequence: also against two, for a CPU engine whose passes of two tokens or more take another path)."""
    request = Request(0, 0.0, (0,), 2)

    def step(n: int) -> float:
        return roofline.step_s(Step((tuple(Work(Sequence(request=request), 1, 0) for _ in range(n)),)))

    cheapest = min(step(1), step(2)) if sequences == 1 else step(sequences)
    # the emulator's run of identical decodes (Roofline.repeated_decode_s) leaves out the per-pass overhead
    return max(0.0, cheapest - roofline.rates.pass_overhead_s - ROUNDING_S)


def batch_tok_s(roofline: Roofline, most: int) -> float:
    """At most how many tokens/s one replica emits running up to `most` sequences a step: each sequence of a
    step emits at most one token, and no step of b sequences is shorter than `floor_step_s(b)`, which grows
    with b; between two sizes priced (every size to 16, then steps of 1/8) the larger size over the smaller's
    floor bounds the sizes in between."""
    sizes = sorted({*range(1, min(most, 16) + 1), *_geometric(17, most), most})
    floors = [floor_step_s(roofline, b) for b in sizes]
    best = 0.0
    for k, (b, floor) in enumerate(zip(sizes, floors, strict=True)):
        upper = sizes[k + 1] - 1 if k + 1 < len(sizes) else b  # sizes b .. upper share b's floor as a bound
        best = max(best, upper / floor if floor > 0 else float("inf"))
    return best


def _geometric(start: int, stop: int) -> list[int]:
    out, b = [], start
    while b < stop:
        out.append(b)
        b = max(b + 1, int(b * 1.125))
    return out


def best_case(
    point: GridPoint,
    roofline: Roofline,
    *,
    users: float,
    rate_tokens: float | None,
    prices: Prices,
    board_w: float | None,
) -> Best:
    """`point`'s best case for a demand of `users` closed-loop users (the most one replica is probed at when the
    demand names none), or open loop `rate_tokens` = the rate x the longest output."""
    floor = floor_step_s(roofline)
    tp = point.plan.tensor_parallel
    if rate_tokens is not None:
        per_gpu = rate_tokens / tp
    elif floor <= 0:
        per_gpu = float("inf")
    else:
        most = int(min(users, max(1, point.plan.slots), MAX_BATCH))
        replica = min(users / floor, batch_tok_s(roofline, most) if most < MAX_BATCH else users / floor)
        per_gpu = replica * EDGE_SLACK / tp
    cost = cost_per_million(prices.per_hour(1, board_w), per_gpu) if per_gpu != float("inf") else None
    if cost is None and prices.per_hour(1, board_w) is not None:
        cost = 0.0
    return Best(floor, per_gpu, cost)


def slo_floor_misses(bounds: tuple[Bound, ...], best: Best) -> tuple[str, ...]:
    """The SLOs `best`'s floor step already breaks at every load, each as `tpot_p99_ms >= 694 > 200`."""
    ms = best.floor_s * 1000
    return tuple(f"{b.key} >= {ms:.0f} > {b.limit_ms:g}" for b in bounds if ms > b.limit_ms)


def dominated(best: Best, rivals: tuple[tuple[str, tuple[float, ...]], ...]) -> str | None:
    """The name of a rival (meeting the demand: its objectives) at least as good as `best` everywhere and better
    somewhere; None when none is."""
    mine = best.objectives()
    for name, theirs in rivals:
        if (
            len(theirs) == len(mine)
            and all(t <= m for t, m in zip(theirs, mine, strict=True))
            and theirs != mine
        ):
            return name
    return None

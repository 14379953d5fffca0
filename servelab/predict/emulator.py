"""The discrete-event loop in virtual time: arrivals go to the engine's scheduler, each step it schedules is
priced by the roofline and advances the clock, and every finished sequence tells the load (closed loop: the
client sends its next request at once).

Pure: requests in, finished sequences (with their token times) out; no clock is read.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from servelab.predict.core import Request, Scheduler, Sequence, Speculation, Step, emit
from servelab.predict.roofline import Roofline


@dataclass
class Outcome:
    """One request after the emulation: its sequence, or why the engine refused it."""

    seq: Sequence
    refused: str | None = None


OnFinish = Callable[[Outcome, float], Iterable[Request]]  # a request ended at t: the requests it lets go


def emulate(
    scheduler: Scheduler,
    roofline: Roofline,
    arrivals: Iterable[Request],
    on_finish: OnFinish = lambda outcome, t: (),
    *,
    speculation: Speculation | None = None,
    max_steps: int = 50_000_000,
    fast: bool = True,
) -> list[Outcome]:
    """Run until every request has finished; the outcomes in the order they finished. `fast`: runs of
    identical decode steps (the scheduler's `steady`) are priced in one loop, to the same times."""
    queue: list[tuple[float, int, Request]] = []
    order = 0
    for r in arrivals:
        heapq.heappush(queue, (r.arrival_s, order, r))
        order += 1
    now, done, steps = 0.0, [], 0
    while queue or scheduler.has_work():
        while queue and queue[0][0] <= now:
            request = heapq.heappop(queue)[2]
            seq = Sequence(request)
            refused = scheduler.add(seq)
            if refused is not None:
                outcome = Outcome(seq, refused)
                done.append(outcome)
                for r in on_finish(outcome, now):
                    heapq.heappush(queue, (max(r.arrival_s, now), order, r))
                    order += 1
        step = scheduler.schedule() if scheduler.has_work() else None
        if step is None:
            if not queue and scheduler.has_work():
                raise RuntimeError("the emulated engine holds requests it can never schedule")
            if not queue:
                break
            now = max(now, queue[0][0])
            continue
        steps += 1
        if steps > max_steps:
            raise RuntimeError(f"the emulation ran past {max_steps} steps")
        now += roofline.step_s(step, speculation)
        for work in step.works:
            seq = work.seq
            if emit(seq, now, work, speculation) and seq.done:
                scheduler.finished(seq)
                outcome = Outcome(seq)
                done.append(outcome)
                for r in on_finish(outcome, now):
                    heapq.heappush(queue, (max(r.arrival_s, now), order, r))
                    order += 1
        if fast and speculation is None:
            now = _repeat_decodes(scheduler, roofline, step, now, queue[0][0] if queue else None)
    return done


def _repeat_decodes(
    scheduler: Scheduler, roofline: Roofline, step: Step, now: float, arrival: float | None
) -> float:
    """Run the steps the scheduler says repeat `step` unchanged, until one ends at or past the next arrival."""
    count = scheduler.steady(step) if step.works and all(not w.seq.done for w in step.works) else 0
    times = roofline.repeated_decode_s(step, count) if count else None
    if not times:
        return now
    seqs = [w.seq for w in step.works]
    for dt in times:
        if arrival is not None and now >= arrival:
            break
        now += dt
        for seq in seqs:
            seq.computed += 1
            seq.generated += 1
            seq.token_times.append(now)
            seq.token_counts.append(1)
    return now

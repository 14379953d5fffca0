"""The discrete-event loop in virtual time: arrivals go to the engine's scheduler, each step it schedules is
priced by the roofline and advances the clock, and every finished sequence tells the load (closed loop: the
client sends its next request at once).

Pure: requests in, finished sequences (with their token times) out; no clock is read.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from servelab.predict.core import Request, Scheduler, Sequence, Speculation, emit
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
) -> list[Outcome]:
    """Run until every request has finished; the outcomes in the order they finished."""
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
    return done

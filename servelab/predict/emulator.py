"""The engine's loop, one implementation for both clocks: `EngineLoop` steps an engine's scheduler from a time it
is told (`now`, seconds), prices each step by the roofline and advances `now` by it; arrivals join at step
boundaries. Two drivers run it:

- `emulate` (predict), in virtual time: a heap of known arrivals, the clock jumping from step end to step end
  (and to the next arrival when idle); pure, no clock is read.
- `servelab sim --emulate` (sim/emulated.py), in wall time: arrivals are HTTP requests as they come, each step
  is computed at its start and its tokens written when the wall clock reaches its end.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np

from servelab.predict.roofline import Roofline
from servelab.scheduling.core import Request, Scheduler, Sequence, Speculation, Step, emit


@dataclass
class Outcome:
    """One request after the emulation: its sequence, or why the engine refused it."""

    seq: Sequence
    refused: str | None = None


@dataclass
class StepResult:
    """What one step did: each sequence that emitted and how many tokens, those that finished (released)."""

    step: Step
    emitted: list[tuple[Sequence, int]] = field(default_factory=list)
    finished: list[Sequence] = field(default_factory=list)


class EngineLoop:
    """An engine's scheduler on a clock: `arrive` adds a request, `step` runs the next iteration from `now`."""

    def __init__(
        self,
        scheduler: Scheduler,
        roofline: Roofline,
        speculation: Speculation | None = None,
        *,
        fast: bool = True,
    ) -> None:
        self.scheduler, self.roofline, self.speculation = scheduler, roofline, speculation
        self.fast = fast and speculation is None
        self.now = 0.0
        self.steps = 0

    def arrive(self, request: Request) -> Outcome:
        """`request` joins the scheduler (it is considered at the next step boundary); refused when the
        engine can never serve it."""
        seq = Sequence(request=request)
        return Outcome(seq, self.scheduler.add(seq))

    def busy(self) -> bool:
        return self.scheduler.has_work()

    def step(self, until: float | None = None) -> StepResult | None:
        """Run the next step from `now`; `now` becomes its end. None when nothing can run. With `fast`, the
        steps the scheduler says repeat it unchanged follow in the same call while they start before `until`
        (the next arrival, `math.inf` when none will come; None: no repeats, the next arrival is not known)."""
        step = self.scheduler.schedule() if self.scheduler.has_work() else None
        if step is None:
            return None
        self.steps += 1
        self.now += self.roofline.step_s(step, self.speculation)
        result = StepResult(step)
        for work in step.works:
            seq = work.seq
            count = emit(seq, self.now, work, self.speculation)
            if count:
                result.emitted.append((seq, count))
                if seq.done:
                    self.scheduler.finished(seq)
                    result.finished.append(seq)
        if self.fast and until is not None and not result.finished:
            self._repeat_decodes(step, until)
        return result

    def _repeat_decodes(self, step: Step, until: float) -> None:
        """Run the steps the scheduler says repeat `step` unchanged, until one ends at or past `until`."""
        count = self.scheduler.steady(step) if step.works else 0
        times = self.roofline.repeated_decode_s(step, count) if count else None
        if not times:
            return
        ends, now = _step_ends(self.now, times, until)
        ones = [1] * len(ends)
        for w in step.works:  # every sequence emits one token at each of those step ends
            seq = w.seq
            seq.computed += len(ends)
            seq.generated += len(ends)
            seq.token_times += ends
            seq.token_counts += ones
        self.now = now


def _step_ends(now: float, times: list[float], until: float) -> tuple[list[float], float]:
    """The end of each step of `times` run from `now` while a step starts before `until`, and the clock after
    them: `now += dt` step by step, as numpy's cumulative sum adds (in order, one at a time)."""
    steps = np.cumsum(np.array([now, *times]))
    if not (steps[1:] >= steps[:-1]).all():  # a step of no or negative time: the plain loop
        ends = []
        for dt in times:
            if now >= until:
                break
            now += dt
            ends.append(now)
        return ends, now
    last = min(int(np.searchsorted(steps, until, side="left")), len(times))  # steps starting before until
    return steps[1 : last + 1].tolist(), float(steps[last])


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
    join_within_s: float = 0.0,
) -> list[Outcome]:
    """Run until every request has finished, in virtual time; the outcomes in the order they finished.
    `fast`: runs of identical decode steps (the scheduler's `steady`) are priced in one loop, to the same
    times. `join_within_s`: a request arriving this soon after a step boundary joins it (stamps rounded to
    the nanosecond, replayed by calibrate.py). Once a boundary admits a request, those arriving within the
    scheduler's `launch_window_s` join too, and the step starts when the last of them has arrived."""
    engine = EngineLoop(scheduler, roofline, speculation, fast=fast)
    queue: list[tuple[float, int, Request]] = []
    done: list[Outcome] = []
    order = itertools.count()  # ties in time keep the order requests were pushed

    def push(requests: Iterable[Request]) -> None:
        for r in requests:
            heapq.heappush(queue, (max(r.arrival_s, engine.now), next(order), r))

    def finish(outcome: Outcome) -> None:
        done.append(outcome)
        push(on_finish(outcome, engine.now))

    push(arrivals)
    while queue or engine.busy():
        window = join_within_s
        while queue and queue[0][0] <= engine.now + window:
            at, _, request = heapq.heappop(queue)
            if at > engine.now + join_within_s:  # it came within the launch window: the step waits for it
                engine.now = at
            window = max(join_within_s, scheduler.launch_window_s)
            outcome = engine.arrive(request)
            if outcome.refused is not None:
                finish(outcome)
        result = engine.step(queue[0][0] if queue else math.inf)
        if result is None:
            if not queue and engine.busy():
                raise RuntimeError("the emulated engine holds requests it can never schedule")
            if not queue:
                break
            engine.now = max(engine.now, queue[0][0])
            continue
        if engine.steps > max_steps:
            raise RuntimeError(f"the emulation ran past {max_steps} steps")
        for seq in result.finished:
            finish(Outcome(seq))
    return done

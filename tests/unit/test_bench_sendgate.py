"""SendGate: new requests start one per event-loop iteration, in arrival order."""

from __future__ import annotations

import asyncio

from servelab.bench.sendgate import SendGate


async def _iterations_at_which_each_passes(gate: SendGate, count: int, cancel: int | None = None) -> list:
    iteration = 0
    running = True

    def tick() -> None:  # counts loop iterations: re-queued once per iteration
        nonlocal iteration
        iteration += 1
        if running:
            asyncio.get_running_loop().call_soon(tick)

    tick()
    passed: list[tuple[int, int]] = []

    async def start(i: int) -> None:
        await gate.turn()
        passed.append((i, iteration))

    tasks = [asyncio.ensure_future(start(i)) for i in range(count)]
    if cancel is not None:
        await asyncio.sleep(0)
        tasks[cancel].cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    running = False
    return passed


def test_simultaneous_starts_pass_one_per_iteration_in_order():
    passed = asyncio.run(_iterations_at_which_each_passes(SendGate(), 6))
    assert [i for i, _ in passed] == list(range(6))
    iterations = [it for _, it in passed]
    assert len(set(iterations)) == 6  # never two set-ups in the same iteration
    assert iterations == sorted(iterations)


def test_a_cancelled_waiter_is_skipped_and_the_rest_still_pass():
    passed = asyncio.run(_iterations_at_which_each_passes(SendGate(), 5, cancel=3))
    assert [i for i, _ in passed] == [0, 1, 2, 4]


def test_a_lone_start_does_not_wait():
    async def lone() -> bool:
        gate = SendGate()
        task = asyncio.ensure_future(gate.turn())
        await asyncio.sleep(0)  # one iteration is enough
        first = task.done()
        await asyncio.sleep(0.01)  # the gate is idle again: the next start goes at once too
        second = asyncio.ensure_future(gate.turn())
        await asyncio.sleep(0)
        return first and second.done()

    assert asyncio.run(lone())

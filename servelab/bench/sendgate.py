"""New requests go out one per event-loop iteration, so that starting them never delays the stamps of the
streams already running.

Setting up a request in aiohttp costs the client ~100 us of CPU. When many start at once (every worker at
the start of a level; a round of equal-length requests ending together), asyncio would run all their
set-ups back to back in one iteration, and every event that arrived meanwhile would be stamped only after
them: at 250 streams, tens of ms late. Through the gate each new request waits for its own iteration,
and the loop polls the sockets (stamping what arrived) between one set-up and the next. The wait comes
before the request's ``sent_ns``, so no server latency is charged with it; in an open loop it shows as
lateness against the intended send time.
"""

from __future__ import annotations

import asyncio
from collections import deque


class SendGate:
    """``await gate.turn()`` before starting a request: at most one start per loop iteration."""

    def __init__(self) -> None:
        self._waiting: deque[asyncio.Future] = deque()
        self._busy = False  # a start happened in this iteration; the release runs in the next

    async def turn(self) -> None:
        loop = asyncio.get_running_loop()
        if not self._busy and not self._waiting:
            self._busy = True
            loop.call_soon(self._release)
            return
        waiter = loop.create_future()
        self._waiting.append(waiter)
        await waiter  # cancelled while waiting: the release skips it

    def _release(self) -> None:
        """Once per iteration while anyone waits: let the oldest live waiter go."""
        while self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_result(None)
                asyncio.get_running_loop().call_soon(self._release)
                return
        self._busy = False

"""Finished requests on their way to the store: batched, flushed at least every 0.25 s.

A commit per record inside the event loop would stall the timestamps of every other stream, so records
are collected and written in one transaction per batch; the level end, the run end and Ctrl-C flush.
"""

from __future__ import annotations

import asyncio
from typing import Any

from servelab.bench.records import RequestRecord

FLUSH_EVERY_S = 0.25


class RecordSink:
    def __init__(self, store: Any | None, run_id: str | None) -> None:
        self.store, self.run_id = store, run_id
        self._pending: list[RequestRecord] = []
        self._task: asyncio.Task | None = None

    def add(self, record: RequestRecord) -> None:
        if self.store is None:
            return
        self._pending.append(record)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._flush_later())

    async def _flush_later(self) -> None:
        await asyncio.sleep(FLUSH_EVERY_S)
        self._write()

    async def flush(self) -> None:
        self._write()

    async def close(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        self._write()

    def _write(self) -> None:
        if self.store is not None and self._pending:
            batch, self._pending = self._pending, []
            self.store.add_requests(self.run_id, batch)

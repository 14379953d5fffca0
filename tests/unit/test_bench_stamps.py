"""Arrival stamps: bytes read together are cut where separate arrivals met, each with its own time."""

from __future__ import annotations

import asyncio

from aiohttp import StreamReader
from aiohttp.base_protocol import BaseProtocol

from servelab.bench.stamps import ArrivalLog, BodyStamps


def test_split_gives_each_piece_its_arrival():
    stamps = BodyStamps(base_end=2)  # two bytes came with the headers
    stamps.ends.extend([5, 7])
    stamps.times.extend([200, 300])
    base = stamps._base_ns
    assert stamps.split(b"hdab", 999) == [(b"hd", base), (b"ab", 200)]
    assert stamps.split(b"cde", 999) == [(b"c", 200), (b"de", 300)]
    assert stamps.split(b"zz", 555) == [(b"zz", 555)]  # never seen arriving: its read time


def test_a_real_aiohttp_stream_reader_is_stamped_at_feed_time():
    async def go() -> tuple[list, int, int]:
        loop = asyncio.get_running_loop()
        reader = StreamReader(BaseProtocol(loop), 2**16, loop=loop)
        log = ArrivalLog()
        stamps = log.watch(reader)
        reader.feed_data(b"data: 1\n\n")
        await asyncio.sleep(0.01)
        reader.feed_data(b"data: 2\n\n")
        chunk = await reader.readany()  # both arrivals in one read
        pieces = stamps.split(chunk, 0)
        log.forget(reader)
        return pieces, reader.total_bytes, len(log._watched)

    pieces, total, watched = asyncio.run(go())
    assert [p for p, _ in pieces] == [b"data: 1\n\n", b"data: 2\n\n"]
    assert pieces[1][1] - pieces[0][1] >= 9_000_000  # 10 ms apart, as fed
    assert total == 18 and watched == 0

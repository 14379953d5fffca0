"""Arrival stamps: bytes read together are cut where separate arrivals met, each with its own time."""

from __future__ import annotations

import asyncio
import time

from aiohttp import StreamReader
from aiohttp.base_protocol import BaseProtocol

from servelab.bench.aiohttp_edge import ArrivalLog
from servelab.bench.stamps import BodyStamps, StallWatch


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


class _Collect:
    def __init__(self) -> None:
        self.reads: list[tuple[bytes, int]] = []
        self.ends: list[BaseException | None] = []

    def arrived(self, data: bytes, t_ns: int) -> None:
        self.reads.append((data, t_ns))

    def closed(self, exc: BaseException | None) -> None:
        self.ends.append(exc)


def test_a_sink_gets_each_arrival_from_the_protocol_callback_and_the_end():
    async def go() -> tuple[tuple, _Collect, bytes, int]:
        loop = asyncio.get_running_loop()
        reader = StreamReader(BaseProtocol(loop), 2**16, loop=loop)
        reader.feed_data(b"data: 0\n\n")  # came with the headers, before the switch
        log, sink = ArrivalLog(), _Collect()
        head = log.watch_sink(reader, sink)
        reader.feed_data(b"data: 1\n\n")
        await asyncio.sleep(0.01)
        reader.feed_data(b"data: 2\n\n")
        reader.feed_eof()
        rest = reader.read_nowait()
        log.forget(reader)
        return head, sink, rest, len(log._sinks)

    head, sink, rest, watched = asyncio.run(go())
    assert head[0] == b"data: 0\n\n"
    assert [d for d, _ in sink.reads] == [b"data: 1\n\n", b"data: 2\n\n"]
    assert sink.reads[0][1] >= head[1] and sink.reads[1][1] - sink.reads[0][1] >= 9_000_000
    assert sink.ends == [None] and rest == b"" and watched == 0  # nothing buffered: it all went to the sink


def test_a_sink_hears_a_connection_error():
    async def go() -> list:
        loop = asyncio.get_running_loop()
        reader = StreamReader(BaseProtocol(loop), 2**16, loop=loop)
        log, sink = ArrivalLog(), _Collect()
        log.watch_sink(reader, sink)
        reader.set_exception(ConnectionResetError("gone"))
        return sink.ends

    ends = asyncio.run(go())
    assert len(ends) == 1 and isinstance(ends[0], ConnectionResetError)


class _Sink:
    last_ns = 0


def test_stall_watch_reports_only_the_silent_stream_after_the_stall_time():
    async def go() -> tuple[list, list, int]:
        watch = StallWatch(0.2)  # looks every 50 ms
        silent, busy, gone = _Sink(), _Sink(), _Sink()
        stalled: list = []
        watch.watch(silent, lambda: stalled.append(("silent", time.perf_counter())))
        watch.watch(busy, lambda: stalled.append(("busy", time.perf_counter())))
        watch.watch(gone, lambda: stalled.append(("gone", time.perf_counter())))
        watch.forget(gone)  # its answer ended: never reported
        t0 = time.perf_counter()
        for _ in range(12):  # 360 ms: busy gets a byte every 30 ms
            await asyncio.sleep(0.03)
            busy.last_ns = time.perf_counter_ns()
        seen = list(stalled)
        watch.forget(busy)
        await asyncio.sleep(0.12)  # nothing left to watch: the timer stops
        timer = watch._timer
        watch.close()
        return [name for name, _ in seen], [t - t0 for _, t in seen], timer

    names, after_s, timer = asyncio.run(go())
    assert names == ["silent"]
    assert 0.2 <= after_s[0] < 1.0  # never before the stall time; soon after (one look is 50 ms)
    assert timer is None

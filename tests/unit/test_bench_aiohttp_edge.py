"""aiohttp_edge: the internals the client relies on are found in the installed aiohttp; without them the
check chooses aiohttp's public path and says so."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest
from aiohttp import web
from aiohttp.client_proto import ResponseHandler

from servelab.bench.aiohttp_edge import ArrivalLog, check_edge

HAS_READ_TIMEOUT = isinstance(getattr(ResponseHandler, "read_timeout", None), property)  # 3.10 to 3.14.4


def test_the_installed_aiohttp_takes_the_protocol_callback_path():
    edge = check_edge()
    assert edge.body == "protocol-callback" and edge.fast_body
    assert edge.aiohttp_version == aiohttp.__version__
    if HAS_READ_TIMEOUT:
        assert (edge.stall_timer, edge.missing) == ("servelab", ())
    else:  # 3.9 and 3.14.5+: aiohttp's own per-read timer stays, and the report names why
        assert (edge.stall_timer, edge.missing) == (
            "aiohttp",
            ("ResponseHandler.read_timeout (settable property)",),
        )


def test_without_the_stream_reader_export_the_public_reader_is_chosen(monkeypatch):
    monkeypatch.delattr(aiohttp, "StreamReader")  # aiohttp itself imports it from aiohttp.streams
    edge = check_edge()
    assert (edge.body, edge.stall_timer) == ("public-reader", "aiohttp") and not edge.fast_body
    assert edge.missing[0] == "aiohttp.StreamReader"


@pytest.mark.parametrize("method", ["feed_data", "feed_eof", "set_exception", "read_nowait", "exception"])
def test_a_stream_reader_without_a_method_the_switch_needs_is_not_switched(monkeypatch, method):
    class Reader:  # aiohttp.StreamReader as a future aiohttp might shape it
        pass

    for name in ("feed_data", "feed_eof", "set_exception", "read_nowait", "exception"):
        if name != method:
            setattr(Reader, name, getattr(aiohttp.StreamReader, name))
    monkeypatch.setattr(aiohttp, "StreamReader", Reader)
    edge = check_edge()
    assert edge.body == "public-reader" and edge.missing[0] == f"StreamReader.{method}"


def test_a_reader_the_trial_cannot_build_chooses_the_public_reader(monkeypatch):
    class Changed(aiohttp.StreamReader):  # a constructor that changed shape
        __slots__ = ()

        def __init__(self, *args, **kwargs) -> None:
            raise TypeError("StreamReader() takes a new argument")

    monkeypatch.setattr(aiohttp, "StreamReader", Changed)
    edge = check_edge()
    assert edge.body == "public-reader"
    assert edge.missing[0].startswith("StreamReader switch (TypeError:")


def test_without_a_settable_read_timeout_aiohttp_keeps_its_own_stall_timer(monkeypatch):
    monkeypatch.delattr(ResponseHandler, "read_timeout", raising=False)
    edge = check_edge()
    assert (edge.body, edge.stall_timer) == ("protocol-callback", "aiohttp")
    assert edge.missing == ("ResponseHandler.read_timeout (settable property)",)


def test_the_report_as_stored_in_the_run_meta():
    edge = check_edge()
    assert edge.to_json() == {
        "aiohttp_version": aiohttp.__version__,
        "body": "protocol-callback",
        "stall_timer": edge.stall_timer,
        "missing": list(edge.missing),
    }


def test_a_body_buffered_past_the_high_water_mark_before_the_switch_reaches_the_sink_whole():
    """aiohttp 3.14.5's read_nowait() drains only the chunks buffered when it is called, and draining can resume
    a paused reader, which may refill the buffer at once: ArrivalLog.watch_sink drains until it is empty, so the
    bytes that came before the switch reach the sink whole and in order."""
    body = b"".join(b"%06d " % i * 100 + b"\n" for i in range(4000))  # 2.8 MB, sent at once

    async def handler(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        await response.write(body)
        await response.write_eof()
        return response

    class Sink:
        last_ns = 0

        def __init__(self, done: asyncio.Future) -> None:
            self.parts: list[bytes] = []
            self.done = done

        def arrived(self, data: bytes, t_ns: int) -> None:
            self.parts.append(data)

        def closed(self, exc: BaseException | None) -> None:
            if not self.done.done():
                self.done.set_result(exc)

    async def main() -> bytes:
        app = web.Application()
        app.router.add_get("/", handler)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        try:
            async with (
                aiohttp.ClientSession(read_bufsize=1 << 16) as session,
                session.get(f"http://127.0.0.1:{port}/") as response,
            ):
                for _ in range(100):  # the body arrives and the reader pauses at its high-water mark
                    if response.content._protocol._reading_paused:  # type: ignore[attr-defined]
                        break
                    await asyncio.sleep(0.01)
                assert response.content._protocol._reading_paused  # type: ignore[attr-defined]
                sink = Sink(asyncio.get_running_loop().create_future())
                head = ArrivalLog().watch_sink(response.content, sink)
                assert head is not None
                if not response.content.is_eof():
                    await asyncio.wait_for(sink.done, 10)
                return head[0] + b"".join(sink.parts)
        finally:
            await runner.cleanup()

    assert asyncio.run(main()) == body

"""A raw asyncio HTTP server on 127.0.0.1 (its own thread) whose generation answers are whatever bytes a test
gives it: ``with answer_server(lambda serial, path: b"HTTP/1.1 200 OK\\r\\n...") as server: server.url``.

aiohttp's server would not let a test send a lone surrogate's bytes in a header, a 307 to anywhere, or a
gzip bomb built on the fly, hence the socket-level server. GET /v1/models answers a model list at once and
every other probe is a 404 (so bench gets past its probes), unless ``gets`` names its bytes; each POST ``*/completions`` is answered by
``answer(serial, path)`` (bytes, or an iterator of bytes written one after another: a stream, a drip), then the
connection is closed. ``server.posts`` counts the generation requests received, ``server.answered`` those
whose answer was written to the end (the server's own log to count stored records against), ``server.accepts``
every connection accepted.

``listener()`` is a second server that only counts the connections made to it (``.accepts``): where a
redirect must not lead.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import Callable, Iterable, Iterator

from tests.drip_server import read_request

MODELS = json.dumps({"object": "list", "data": [{"id": "raw", "object": "model"}]}).encode()
Answer = Callable[[int, str], bytes | Iterable[bytes]]


def http_answer(
    status: str, body: bytes, headers: dict[str, str] | None = None, *, kind: str = "application/json"
) -> bytes:
    lines = [
        f"HTTP/1.1 {status}",
        f"Content-Type: {kind}",
        f"Content-Length: {len(body)}",
        "Connection: close",
    ]
    lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode(
        "utf-8", "surrogatepass"
    ) + body  # lone surrogates: bad UTF-8


def sse_head(extra: bytes = b"") -> bytes:
    """The head of a streamed answer, closed by the server at its end (no length, no chunking)."""
    return b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n" + extra + b"\r\n"


class AnswerServer:
    def __init__(
        self, answer: Answer | None, pause_s: float = 0.0, gets: dict[str, bytes] | None = None
    ) -> None:
        self.answer = answer
        self.gets = gets or {}
        self.pause_s = pause_s  # between the parts of an iterated answer
        self.posts = 0
        self.answered = 0
        self.accepts = 0
        self.heads: list[bytes] = []  # the head of each generation request
        self.url = ""
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(
            target=self._loop.run_until_complete, args=(self._main(),), daemon=True
        )

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._ready.set()
        async with server:
            await self._stop.wait()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepts += 1
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            if self.answer is None:  # a listener: count and hang up
                writer.close()
                return
            method, path, head = await read_request(reader)
            if not (method == "POST" and path.endswith("/completions")):
                if path in self.gets:
                    writer.write(self.gets[path])
                else:
                    writer.write(
                        http_answer("200 OK", MODELS)
                        if path == "/v1/models"
                        else http_answer("404 Not Found", b"")
                    )
                await writer.drain()
            else:
                self.posts += 1
                self.heads.append(head)
                answer = self.answer(self.posts, path)
                for part in [answer] if isinstance(answer, bytes) else answer:
                    writer.write(part)
                    await writer.drain()
                    if self.pause_s:
                        await asyncio.sleep(self.pause_s)
                self.answered += 1
        writer.close()

    def __enter__(self) -> AnswerServer:
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._stop.set)  # type: ignore[union-attr]
        self._thread.join(10)


@contextlib.contextmanager
def answer_server(
    answer: Answer, pause_s: float = 0.0, gets: dict[str, bytes] | None = None
) -> Iterator[AnswerServer]:
    with AnswerServer(answer, pause_s, gets) as server:
        yield server


@contextlib.contextmanager
def listener() -> Iterator[AnswerServer]:
    with AnswerServer(None) as server:
        yield server

"""A raw asyncio server on 127.0.0.1 that drips its response headers one byte at a time (for ~10 minutes),
in its own thread: ``with header_drip(models_ok=True) as url``. aiohttp would not let a test write half a
header, hence the socket-level server.

``models_ok``: GET /v1/models answers a model list at once and every other probe is a 404 (so bench gets past
its probes); only the generation POSTs (``*/completions``) drip. Else every request drips.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import Iterator

DRIP_S = 0.05
DRIP_BYTES = 12000  # 10 minutes: far past any deadline a test sets
MODELS = json.dumps({"object": "list", "data": [{"id": "drip", "object": "model"}]}).encode()


async def read_request(reader: asyncio.StreamReader) -> tuple[str, str, bytes]:
    """One request off a raw loopback connection: its method, path and head (the body read and dropped)."""
    head = await reader.readuntil(b"\r\n\r\n")
    method, path, _ = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ", 2)
    length = next(
        (
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        ),
        0,
    )
    await reader.readexactly(length)
    return method, path, head


def _answer(status: str, body: bytes, kind: str = "application/json") -> bytes:
    head = f"HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    return head.encode() + body


class HeaderDrip:
    def __init__(self, models_ok: bool) -> None:
        self.models_ok = models_ok
        self.url = ""
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(
            target=self._loop.run_until_complete, args=(self._main(),), daemon=True
        )

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        self._ready.set()
        async with server:
            await self._stop.wait()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            method, path, _ = await read_request(reader)
            if self.models_ok and not (method == "POST" and path.endswith("/completions")):
                writer.write(
                    _answer("200 OK", MODELS) if path == "/v1/models" else _answer("404 Not Found", b"")
                )
                await writer.drain()
            else:
                writer.write(b"HTTP/1.1 200 OK\r\nX-Drip: ")
                for _ in range(DRIP_BYTES):
                    writer.write(b"a")
                    await writer.drain()
                    await asyncio.sleep(DRIP_S)
        writer.close()

    def __enter__(self) -> str:
        self._thread.start()
        self._ready.wait(10)
        return self.url

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._stop.set)  # type: ignore[union-attr]
        self._thread.join(10)


@contextlib.contextmanager
def header_drip(*, models_ok: bool = False) -> Iterator[str]:
    with HeaderDrip(models_ok) as url:
        yield url

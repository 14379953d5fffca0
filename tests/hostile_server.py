"""A small hostile OpenAI-compatible server on 127.0.0.1 (aiohttp, in its own thread), one misbehaviour per
``mode``: ``with hostile_server("list_finish") as server: ... server.url, server.posts``.

Modes (each answer is otherwise a well-formed 3-chunk chat stream):
  huge_usage      every other answer's final usage reports 2**31 completion tokens
  list_finish     finish_reason is a list
  nested          an event whose delta content is JSON nested 100,000 deep
  bigint          an event whose usage holds a 5,000-digit integer
  endless_line    a data line that never ends (bytes without a newline, forever)
  keepalive       keep-alive comments forever, never a token
  props_list      /props answers a JSON list
  meta_string     a llama-server whose /v1/models meta is a string
  models_drip     /v1/models drips one byte every 0.2 s (for ~an hour)
  models_huge     /v1/models streams an endless body
  plain           no misbehaviour (with ``server.seen``: the method, path and Authorization of each request)
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import threading
from collections.abc import Iterator

from aiohttp import web

MODEL = "hostile"


def _chunk(delta: dict | None = None, finish=None, usage: dict | None = None) -> bytes:
    event: dict = {"choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}]}
    if usage is not None:
        event["usage"] = usage
    return b"data: " + json.dumps(event).encode() + b"\n\n"


def _usage_only(completion) -> bytes:
    usage = {"prompt_tokens": 5, "completion_tokens": completion}
    return b"data: " + json.dumps({"choices": [], "usage": usage}).encode() + b"\n\n"


class HostileServer:
    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.posts = 0  # generation requests received
        self.seen: list[tuple[str, str, str | None]] = []  # (method, path, Authorization) of every request
        self.url = ""
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def _app(self) -> web.Application:
        app = web.Application(middlewares=[self._record])
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/props", self._props)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/v1/completions", self._chat)
        return app

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._main())

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        runner = web.AppRunner(self._app(), handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}"
        self._ready.set()
        await self._stop.wait()
        await runner.cleanup()

    def __enter__(self) -> HostileServer:
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._stop.set)  # type: ignore[union-attr]
        self._thread.join(10)

    @web.middleware
    async def _record(self, request: web.Request, handler) -> web.StreamResponse:
        self.seen.append((request.method, request.path, request.headers.get("Authorization")))
        return await handler(request)

    async def _models(self, request: web.Request) -> web.StreamResponse:
        entry: dict = {"id": MODEL, "object": "model"}
        if self.mode == "meta_string":
            entry["meta"] = "not a mapping"
        body = json.dumps({"object": "list", "data": [entry]}).encode()
        if self.mode not in ("models_drip", "models_huge"):
            return web.json_response(body=body)
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        with contextlib.suppress(ConnectionError):
            if self.mode == "models_drip":
                for _ in range(18000):
                    await response.write(b" ")
                    await asyncio.sleep(0.2)
            else:
                block = b" " * 65536
                for _ in range(1 << 20):  # 64 GiB: "endless"
                    await response.write(block)
        return response

    async def _props(self, request: web.Request) -> web.Response:
        if self.mode == "props_list":
            return web.json_response([1, 2, 3])
        if self.mode == "meta_string":
            return web.json_response(
                {"default_generation_settings": {"n_ctx": 4096}, "total_slots": 4, "build_info": "b1"}
            )
        return web.Response(status=404)

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        self.posts += 1
        serial = self.posts
        await request.read()
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        with contextlib.suppress(ConnectionError):
            for part in self._stream(serial):
                await response.write(part)
                await asyncio.sleep(0.001)
            if self.mode == "endless_line":
                await response.write(b"data: {")
                for _ in itertools.count():
                    await response.write(b"x" * 4096)
                    await asyncio.sleep(0.001)
            if self.mode == "keepalive":
                for _ in itertools.count():
                    await response.write(b": keep-alive\n\n")
                    await asyncio.sleep(0.02)
        return response

    def _stream(self, serial: int) -> list[bytes]:
        mode = self.mode
        if mode in ("endless_line", "keepalive"):
            return [_chunk({"role": "assistant"})]
        parts = [_chunk({"role": "assistant"}), _chunk({"content": "a"}), _chunk({"content": "b"})]
        if mode == "nested":
            parts.append(
                b'data: {"choices":[{"delta":{"content":' + b"[" * 100_000 + b"]" * 100_000 + b"}}]}\n\n"
            )
        if mode == "bigint":
            parts.append(b'data: {"choices":[],"usage":{"completion_tokens":' + b"7" * 5000 + b"}}\n\n")
        finish = ["stop"] if mode == "list_finish" else "stop"
        completion = 2**31 if mode == "huge_usage" and serial % 2 == 0 else 2
        if mode == "huge_usage":  # continuous usage (vLLM): the count rides on the chunk with the choice
            parts.append(_chunk({}, finish, usage={"prompt_tokens": 5, "completion_tokens": completion}))
        else:
            parts.append(_chunk({}, finish))
            parts.append(_usage_only(completion))
        parts.append(b"data: [DONE]\n\n")
        return parts


@contextlib.contextmanager
def hostile_server(mode: str) -> Iterator[HostileServer]:
    with HostileServer(mode) as server:
        yield server

"""`servelab sim`: an OpenAI-compatible server with exactly known behaviour, the ground truth for the client.

Every content chunk is written at an ABSOLUTE deadline, t0 + ttft + j·K·itl (t0 = when the request was
received), never after a relative sleep, so lateness does not accumulate. One _Ticker plays every stream:
a heap of deadlines, a loop timer until 3 ms before the earliest (asyncio wakes up to 1 ms late, and a VM
can take a millisecond or more to wake an idle process), then a callback re-queued each loop iteration
through the rest, writing each due chunk straight to its transport. No task wakes up per chunk, so one
core offers well over 50,000 events/s. The sim spends CPU to be on time. Usable in-process::

    async with SimServer(SimConfig(itl_ms=5)) as url: ...
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import json
import time
from typing import TYPE_CHECKING, Any, TypedDict

from aiohttp import HttpVersion11, web

from servelab.errors import ConfigError
from servelab.sim.answer import SimAnswer
from servelab.sim.config import SimConfig, fault_for, sim_prompt_tokens

if TYPE_CHECKING:
    from servelab.predict.machine import EmulatedEngine
    from servelab.sim.emulated import WallClockEngine

SPIN_NS = 3_000_000
LOG_LIMIT = 100_000  # requests kept in the /sim/requests log (oldest dropped first)


class RequestLog(TypedDict):
    """One request in the /sim/requests log: perf_counter_ns, i.e. CLOCK_MONOTONIC, shared by processes."""

    t0_ns: int
    first_chunk_ns: int | None
    chunks_ns: list[int]


class SimServer:
    """The aiohttp application and its listening socket. ``url`` is set once started."""

    def __init__(self, config: SimConfig, emulate: EmulatedEngine | None = None) -> None:
        self.config = config
        self.url = ""
        self.requests_seen = 0
        self.log: dict[str, RequestLog] = {}  # by X-Request-Id
        self._runner: web.AppRunner | None = None
        self._ticker = _Ticker()
        self._slots = asyncio.Semaphore(config.slots) if config.slots else None  # FIFO: waiters in order
        self.emulated: WallClockEngine | None = None  # --emulate: the engine's scheduler times every answer
        if emulate is not None:
            from servelab.sim.emulated import WallClockEngine

            self.emulated = WallClockEngine(emulate, self._ticker.start)

    async def __aenter__(self) -> str:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def start(self) -> str:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/v1/completions", self._completions)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/health", self._health)
        app.router.add_post("/tokenize", self._tokenize)
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/sim/requests", self._request_log)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.config.host, self.config.port, backlog=4096)
        try:
            await site.start()
        except OSError as exc:  # port in use, host not on this machine
            await self._runner.cleanup()
            self._runner = None
            where = f"{self.config.host}:{self.config.port}"
            raise ConfigError(
                f"cannot listen on {where}: {exc.strerror or exc}; choose another --port/--host"
            ) from exc
        port = self._runner.addresses[0][1]
        self.url = f"http://{self.config.host}:{port}"
        return self.url

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # -- small endpoints ---------------------------------------------------------------------------------
    async def _models(self, request: web.Request) -> web.Response:
        entry: dict[str, object] = {"id": self.config.model, "object": "model", "owned_by": "servelab-sim"}
        entry["max_model_len"] = self.config.context
        return web.json_response({"object": "list", "data": [entry]})

    async def _health(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def _metrics(self, request: web.Request) -> web.Response:
        text = f"# TYPE sim_requests_total counter\nsim_requests_total {self.requests_seen}\n"
        return web.Response(text=text, content_type="text/plain")

    async def _request_log(self, request: web.Request) -> web.Response:
        """When each request arrived (t0) and each content chunk was written, by X-Request-Id."""
        return web.json_response(self.log)

    async def _tokenize(self, request: web.Request) -> web.Response:
        """vLLM-style (prompt or messages → count, tokens, max_model_len); llama.cpp-style "content" too."""
        body = await _json_body(request)
        if body is None:
            return _error(400, "body is not JSON")
        if "messages" in body:
            count = sim_prompt_tokens(body, chat=True)
        else:
            count = sim_prompt_tokens({"prompt": body.get("prompt", body.get("content", ""))}, chat=False)
        tokens = list(range(100, 100 + count))
        return web.json_response({"count": count, "tokens": tokens, "max_model_len": self.config.context})

    # -- generation ----------------------------------------------------------------------------------------
    async def _chat(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, chat=True)

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, chat=False)

    async def _generate(self, request: web.Request, chat: bool) -> web.StreamResponse:
        t0_ns = time.perf_counter_ns()
        n = self.requests_seen
        self.requests_seen += 1
        request_id = request.headers.get("X-Request-Id", f"sim-{n}")
        self.log[request_id] = {"t0_ns": t0_ns, "first_chunk_ns": None, "chunks_ns": []}
        if len(self.log) > LOG_LIMIT:
            del self.log[next(iter(self.log))]
        body = await _json_body(request)
        if body is None:
            return _error(400, "body is not JSON")
        fault = fault_for(self.config.faults, n)
        early = await self._early_fault(request, fault)
        if early is not None:
            return early
        plan, problem = self._plan(body, chat)
        if problem is not None:
            return problem
        if self.emulated is not None:
            return await self._emulate(self.emulated, request, body, plan, (t0_ns, n))
        async with (
            self._slots or contextlib.nullcontext()
        ):  # with --slots, the answer starts once one is free
            start_ns = time.perf_counter_ns() if self._slots else t0_ns
            if not body.get("stream"):
                await self._ticker.sleep_until(self.config.chunk_deadline_ns(start_ns, plan.chunks - 1))
                return web.json_response(plan.full_response(n))
            return await self._stream(request, plan, (start_ns, n), self.log[request_id], fault)

    async def _early_fault(self, request: web.Request, fault: str | None) -> web.StreamResponse | None:
        if fault == "refuse":
            if request.transport is not None:
                request.transport.abort()
            return web.Response(status=500)  # never reaches the client: the connection is gone
        if fault == "500":
            return _error(500, "simulated internal error")
        if fault == "429":
            return _error(429, "simulated rate limit", headers={"Retry-After": "1"})
        return None

    def _plan(self, body: dict, chat: bool) -> tuple[SimAnswer, web.Response | None]:
        cfg = self.config
        model = body.get("model")
        if model not in (None, "", cfg.model):
            return SimAnswer.empty(), _error(404, f"The model `{model}` does not exist.")
        max_tokens = body.get("max_tokens") or body.get("max_completion_tokens") or cfg.max_tokens
        prompt_tokens = sim_prompt_tokens(body, chat)
        if prompt_tokens + max_tokens > cfg.context:
            return SimAnswer.empty(), _error(
                400,
                f"This model's maximum context length is {cfg.context} tokens. However, you requested "
                f"{prompt_tokens + max_tokens} tokens ({prompt_tokens} in the messages, {max_tokens} in the completion).",
            )
        ignore_eos = bool(body.get("ignore_eos")) and cfg.honour_ignore_eos
        out = max_tokens if ignore_eos or cfg.eos_after is None else min(max_tokens, cfg.eos_after)
        options = body.get("stream_options") or {}
        usage = cfg.usage
        if usage == "honour":
            usage = (
                "off" if not options.get("include_usage") else "final"
            )  # as vLLM: continuous needs include
            usage = "continuous" if usage == "final" and options.get("continuous_usage_stats") else usage
        finish = "length" if out == max_tokens else "stop"
        answer = SimAnswer(
            chat=chat,
            model=cfg.model,
            prompt_tokens=prompt_tokens,
            out=out,
            k=cfg.tokens_per_chunk,
            usage=usage,
            finish=finish,
        )
        return answer, None

    async def _emulate(
        self,
        engine: WallClockEngine,
        request: web.Request,
        body: dict,
        plan: SimAnswer,
        start: tuple[int, int],
    ) -> web.StreamResponse:
        """The emulated engine decides when each token is written (sim/emulated.py)."""
        from servelab.sim.emulated import EmulatedStream

        t0_ns, n = start
        log = self.log[request.headers.get("X-Request-Id", f"sim-{n}")]
        sink = EmulatedStream(plan, n, log, asyncio.get_running_loop().create_future())
        refused = engine.submit(engine.words.request_ids(body, plan.chat), plan.out, t0_ns, sink)
        if refused is not None:
            return _error(400, refused)
        if not body.get("stream"):
            await sink.done
            return web.json_response(plan.full_response(n))
        response = await self._open_stream(request, plan, start)
        sink.attach(request.transport, response.chunked)
        await sink.done
        if sink.ok:
            with contextlib.suppress(ConnectionResetError):
                await response.write_eof()
        return response

    async def _open_stream(
        self, request: web.Request, plan: SimAnswer, start: tuple[int, int]
    ) -> web.StreamResponse:
        """The SSE response with its headers sent (and the role chunk, for chat)."""
        t0_ns, n = start
        headers = {
            "Content-Type": "text/event-stream",
            "Cache-Control": "no-cache",
            "X-Sim-T0-Ns": str(t0_ns),
        }
        response = web.StreamResponse(headers=headers)
        if request.version >= HttpVersion11:
            response.enable_chunked_encoding()  # the stream jobs frame their writes themselves
        await response.prepare(request)  # a StreamResponse sends its headers here
        if plan.chat and self.config.role_chunk:
            await response.write(plan.event(n, plan.role_delta(), None, 0))
        return response

    async def _stream(
        self,
        request: web.Request,
        plan: SimAnswer,
        start: tuple[int, int],
        log: RequestLog,
        fault: str | None,
    ):
        t0_ns, n = start
        response = await self._open_stream(request, plan, start)
        fault_at = plan.chunks // 2 if fault in ("drop", "stall", "malformed") else None
        keepalive_ns = int((self.config.keepalive_ms or 0) * 1e6)
        job = _StreamJob(
            request.transport,
            chunked=response.chunked,
            plan=plan,
            start=(t0_ns, n),
            config=self.config,
            log=log,
            fault_at=fault_at,
            keepalive_ns=keepalive_ns,
        )
        if job.transport is None:
            return response
        if not await self._ticker.run(job):
            return response  # the client went away
        if fault_at is not None and fault is not None:  # fault_at is set only for a mid-stream fault
            return await self._mid_stream_fault(request, response, fault)
        with contextlib.suppress(ConnectionResetError):  # the client may close once it has read [DONE]
            await response.write_eof()
        return response

    async def _mid_stream_fault(self, request: web.Request, response: web.StreamResponse, fault: str):
        if fault == "malformed":
            await response.write(b'data: {"choices": [{"delta": {"content": "x"\n\n')
            await response.write_eof()
        elif fault == "stall":
            await asyncio.sleep(self.config.stall_s)
        elif request.transport is not None:
            request.transport.abort()
        return response


class _StreamJob:
    """One streamed answer played by the _Ticker: each step writes what is due straight to the transport
    (chunked framing done here), so no task wakes up per event. The last content chunk, the usage event and
    [DONE] go out in one write; a mid-stream fault stops the job at its chunk's deadline."""

    def __init__(
        self,
        transport,
        *,
        chunked: bool,
        plan: SimAnswer,
        start: tuple[int, int],
        config: SimConfig,
        log: RequestLog,
        fault_at: int | None,
        keepalive_ns: int,
    ) -> None:
        self.transport, self.chunked, self.plan = transport, chunked, plan
        self.t0_ns, self.n = start
        self.config, self.log, self.chunks_ns = config, log, log["chunks_ns"]
        self.stop_at = plan.chunks if fault_at is None else fault_at
        self.keepalive_ns = keepalive_ns
        self.j = 0
        self.ok = True

    def first_due(self, now_ns: int) -> int:
        return self._next_due(now_ns)

    def _next_due(self, now_ns: int) -> int:
        deadline = self.config.chunk_deadline_ns(self.t0_ns, self.j)
        if self.keepalive_ns and deadline - now_ns > self.keepalive_ns:
            self._comment_due = True
            return now_ns + self.keepalive_ns
        self._comment_due = False
        return deadline

    def step(self) -> int | None:
        """Write what is due now; the next deadline, or None when the job is over."""
        transport = self.transport
        if transport.is_closing():
            self.ok = False
            return None
        if self._comment_due:
            transport.write(self._frame(b": keep-alive\n\n"))
            return self._next_due(time.perf_counter_ns())
        if self.j == self.stop_at:
            return None
        plan, j = self.plan, self.j
        data = plan.content_event(self.n, j)
        if j == plan.chunks - 1:
            tail = plan.usage_event(self.n) if plan.usage in ("final", "continuous") else b""
            data = data + tail + b"data: [DONE]\n\n"
        written_ns = time.perf_counter_ns()
        self.chunks_ns.append(written_ns)
        if j == 0:
            self.log["first_chunk_ns"] = written_ns
        transport.write(self._frame(data))
        self.j = j + 1
        if self.j == plan.chunks:
            return None
        return self._next_due(written_ns)

    def _frame(self, data: bytes) -> bytes:
        return b"%x\r\n%b\r\n" % (len(data), data) if self.chunked else data


class _Ticker:
    """One timer for every stream: a heap of deadlines, a loop timer until 3 ms before the earliest, then
    a callback re-queued every loop iteration (a yield) through the rest, stepping each job on time."""

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, Any]] = []
        self._serial = 0
        self._handle: asyncio.Handle | None = None
        self._armed_ns: int | None = None  # the deadline the pending timer was set for (None: spinning)

    async def run(self, job: _StreamJob) -> bool:
        """Play the job to its end; False when the client went away."""
        await self.start(job)
        return job.ok

    def start(self, job: Any) -> asyncio.Future[None]:
        """Step `job` at its deadlines (`first_due`, then what each `step` returns) until a step returns None;
        the future resolves then."""
        future = asyncio.get_running_loop().create_future()
        self._push(job.first_due(time.perf_counter_ns()), (job, future))
        return future

    async def sleep_until(self, deadline_ns: int) -> None:
        future = asyncio.get_running_loop().create_future()
        self._push(deadline_ns, (None, future))
        await future

    def _push(self, deadline_ns: int, entry: tuple) -> None:
        self._serial += 1
        heapq.heappush(self._heap, (deadline_ns, self._serial, entry))
        if self._handle is None or (self._armed_ns is not None and deadline_ns < self._armed_ns):
            self._arm()

    def _arm(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        if not self._heap:
            return
        loop = asyncio.get_running_loop()
        wait_ns = self._heap[0][0] - time.perf_counter_ns()
        if wait_ns > SPIN_NS:
            self._armed_ns = self._heap[0][0]
            self._handle = loop.call_later((wait_ns - SPIN_NS) / 1e9, self._run)
        else:
            self._armed_ns = None
            self._handle = loop.call_soon(self._run)

    def _run(self) -> None:
        self._handle = None
        heap = self._heap
        now = time.perf_counter_ns()
        while heap and heap[0][0] <= now:
            _, serial, entry = heapq.heappop(heap)
            job, future = entry
            next_ns = None if job is None or future.done() else job.step()
            if next_ns is None:
                if not future.done():
                    future.set_result(None)
            else:
                heapq.heappush(heap, (next_ns, serial, entry))
            if heap and heap[0][0] > now:
                now = time.perf_counter_ns()
        self._arm()


async def _json_body(request: web.Request) -> dict | None:
    try:
        body = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    return body if isinstance(body, dict) else None


def _error(status: int, message: str, headers: dict | None = None) -> web.Response:
    kind = {400: "BadRequestError", 404: "NotFoundError", 429: "RateLimitError"}.get(
        status, "InternalServerError"
    )
    body = {"error": {"message": message, "type": kind, "code": status}}
    return web.json_response(body, status=status, headers=headers)

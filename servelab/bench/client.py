"""The streaming client: one aiohttp session, keep-alive, 1 MiB read buffer, a monotonic ns stamp per read.

``sent_ns`` is stamped when aiohttp has written the request headers (trace hook), so building the request
in Python is not charged to the server's TTFT; sending the body is. ``await client.send(request)`` always returns a RequestRecord and never raises: failures become
``status="error"`` with an ``error_kind`` from records.ERROR_KINDS, and cancellation (Ctrl-C) becomes a
``cancelled`` record. Each read of the body goes from aiohttp's protocol callback straight to the parser
(aiohttp_edge.ArrivalLog.watch_sink): no task wakes up per read. Each event is stamped with the
``perf_counter_ns()`` of the socket read that carried its first byte, taken in that callback when the bytes
arrive; parsing runs a moment later, after every stream woken in the same loop iteration has handed over
its bytes (``_DeferredParse``). Where aiohttp_edge.check_edge finds the internals missing, the body is read
through aiohttp's public reader instead (same records, stamps taken at read time); ``client.edge`` says
which path runs. The API key goes in
the Authorization header only; error texts are cut short and never contain it. A request whose body could
not be written to a REUSED keep-alive connection (the server had closed it while idle) is sent again
(up to 3 times) on another: it never reached the server, so it is a client artefact, not a server error.

Redirects: a 3xx answer is the error kind ``redirect``, its message naming where it pointed (credentials and
query left out); with ``follow_redirects`` one to the same scheme, host and port (sync_http.same_origin) is
sent again there, the same POST, up to MAX_REDIRECTS times. The load never goes anywhere the user did not name.

Uncompressed: every request asks for ``Accept-Encoding: identity`` and aiohttp never inflates a body; an answer
that comes compressed anyway is ``malformed``. A gzip stream inflates a thousandfold (a 2 MiB answer to 2 GiB,
in pieces no byte limit sees before they exist), inflating would stamp tokens by when zlib emitted them rather
than when they arrived, and no LLM server compresses its SSE (a compressor holds events back): so every byte
the client parses is a byte that came off the socket, and ``max_body_bytes`` bounds the answer's memory.

Bounded: a whole request (connect, headers, body) gets ``deadline_s`` (kind ``deadline``) besides the stall
timeout; an SSE line or event over ``max_line_bytes`` or a body over ``max_body_bytes`` ends it as
``too_large``; an answer that is not valid HTTP (a head over aiohttp's limits, bad chunk sizes, a NUL in a
header), and a server value of the wrong type, range or size (events.MalformedEvent, JSON nested too
deep, a 5,000-digit integer) as ``malformed``. Anything else that goes wrong inside the client for one
request becomes a ``client_error`` record: no exception from one response takes a request off the books.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import yarl

from servelab.bench.aiohttp_edge import ArrivalLog, check_edge, drop_read_timeout, stall_error
from servelab.bench.collector import QuietCollector
from servelab.bench.events import MalformedEvent, StreamTally, count_tokens
from servelab.bench.limits import DEFAULT_DEADLINE_S, DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_LINE_BYTES
from servelab.bench.sendgate import SendGate
from servelab.bench.sse import SseParser, SseTooLarge
from servelab.bench.stamps import StallWatch
from servelab.redact import redact_text
from servelab.results.records import RequestRecord, storable_text
from servelab.results.run import EdgeReport
from servelab.sync_http import redirect_refused, same_origin

STALE_PREFIX = "stale keep-alive connection: "  # the request never reached the server; sent again
STALE_RETRIES = 3
_COMPRESSED = (
    "the answer is {}-encoded although the client asked for Accept-Encoding: identity; "
    "compressed answers are not inflated (they could grow past --max-body-bytes)"
)
# --follow-redirects: hops to the same host and port before the request is a `redirect` error
MAX_REDIRECTS = 5
# json's C scanner: stateless between calls, shared by every stream. JSONDecoder.__init__ sets scan_once;
# typeshed does not declare it.
_SCAN: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
_fast_loads: Callable[[memoryview], Any] | None
try:  # orjson decodes a chunk in about half the time of json's scanner; anything it refuses goes to json
    import orjson

    _fast_loads = orjson.loads
except ImportError:  # pragma: no cover - orjson is a dependency; a bare environment still works
    _fast_loads = None
ERROR_BODY_BYTES = 4096  # read of an HTTP error's body, for its message
# orjson takes one-event reads up to this size; longer ones go to json, so nesting json refuses as too deep
# (RecursionError at ~1,000 levels, which takes 2,000 bytes) cannot pass through orjson (3.8 takes 100,000)
FAST_MAX_BYTES = 1024
READ_BUFSIZE = 1 << 20  # aiohttp's 64 KiB default collapses throughput at long contexts (vLLM #39963)


@dataclass(frozen=True, kw_only=True)
class ClientRequest:
    """One request to send, and where it belongs in the run."""

    path: str  # "/v1/chat/completions" or "/v1/completions"
    body: dict  # with stream=True, max_tokens and the engine's extra fields
    target_index: int = 0
    level: str = "c=1"
    repeat: int = 0
    request_index: int = 0
    phase: str = "measure"
    intended_ns: int | None = None
    expected_prompt_tokens: int | None = None
    expected_cached_tokens: int | None = None
    serial: int = 0  # position in the level: request_index repeats when a pool of prompts is cycled
    payload: bytes | None = field(default=None, repr=False, compare=False)  # ``body`` as JSON, encoded ahead

    def encoded_body(self) -> bytes:
        """The body as sent: ``payload`` when the caller encoded it before the load began, else now."""
        return self.payload if self.payload is not None else json.dumps(self.body).encode()

    @property
    def request_id(self) -> str:
        """Sent as X-Request-Id (vLLM and others log it) so server logs can be joined with records."""
        return f"servelab-{self.target_index}-{self.level}-{self.repeat}-{self.phase}-{self.request_index}-{self.serial}"

    @property
    def max_tokens(self) -> int | None:
        return self.body.get("max_tokens")

    @property
    def ignore_eos(self) -> bool:
        return bool(self.body.get("ignore_eos"))


class StreamClient:
    """``async with StreamClient(url, api_key) as client: record = await client.send(request)``.

    ``authorization``: the whole Authorization header (instead of Bearer ``api_key``), e.g. the probe's
    Basic from user:password in the URL; ``secrets``: more strings kept out of error texts.

    ``edge``: the result of ``aiohttp_edge.check_edge()`` when the caller already has it (the runner
    records it in the run's meta); else the client checks at start-up. ``client.edge`` is the path taken."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        stall_timeout_s: float = 120.0,
        keep_alive: bool = True,
        edge: EdgeReport | None = None,
        deadline_s: float = DEFAULT_DEADLINE_S,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        authorization: str | None = None,
        secrets: tuple[str, ...] = (),
        follow_redirects: bool = False,
    ) -> None:
        self._keep_alive = keep_alive
        self._follow_redirects = follow_redirects
        self._deadline_s = deadline_s
        self._max_line_bytes, self._max_body_bytes = max_line_bytes, max_body_bytes
        self.base_url = base_url.rstrip("/")
        self._headers = {
            "Content-Type": "application/json",
            "Accept": "text/event-stream",
            "Accept-Encoding": "identity",  # see the module's docstring: answers are never inflated
        }
        authorization = authorization or (f"Bearer {api_key}" if api_key else None)
        if authorization:  # the probes' header (HttpProbe.authorization): Bearer key or Basic from the URL
            self._headers["Authorization"] = authorization
        self._secrets = [api_key, authorization, authorization and authorization.partition(" ")[2], *secrets]
        self._stall_timeout_s = stall_timeout_s
        self._session: aiohttp.ClientSession | None = None
        self._deferred = _DeferredParse()
        self.edge = edge
        self._arrivals: ArrivalLog | None = None  # None: the public reader (see aiohttp_edge)
        self._stalls = StallWatch(stall_timeout_s)
        self._own_stall_timer = False
        self._collector = QuietCollector()
        self._gate = SendGate()

    async def __aenter__(self) -> StreamClient:
        edge = self.edge = self.edge or check_edge()
        self._arrivals = ArrivalLog() if edge.fast_body else None
        self._own_stall_timer = edge.stall_timer == "servelab"
        if self._keep_alive:
            connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=60, ttl_dns_cache=300)
        else:
            connector = aiohttp.TCPConnector(limit=0, force_close=True, ttl_dns_cache=300)
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=30, sock_read=self._stall_timeout_s)
        trace = aiohttp.TraceConfig()
        trace.on_request_headers_sent.append(_stamp_headers_sent)
        trace.on_connection_reuseconn.append(_mark_reused)
        self._session = aiohttp.ClientSession(
            connector=connector,
            timeout=timeout,
            read_bufsize=READ_BUFSIZE,
            headers=self._headers,
            trace_configs=[trace],
            cookie_jar=aiohttp.DummyCookieJar(),
            auto_decompress=False,
        )
        self._collector.__enter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._stalls.close()
        try:
            if self._session is not None:
                await self._session.close()
                self._session = None
        finally:
            self._collector.__exit__()

    async def send(self, request: ClientRequest) -> RequestRecord:
        """Send one streaming request; a RequestRecord whatever happens."""
        session = self._session
        if session is None:
            raise RuntimeError("StreamClient used outside `async with`")
        started_ns = time.perf_counter_ns()
        try:
            record = await self._send_once(session, request)
            for _ in range(STALE_RETRIES):  # kept-alive connections the server had closed: never reached it
                if record.error_kind != "connect" or not (record.error or "").startswith(STALE_PREFIX):
                    break
                record = await self._send_once(session, request)
        except Exception as exc:  # a bug or a surprise for this one request: still a record
            message = f"{type(exc).__name__}: {exc}"
            return self._record(request, StreamTally(), started_ns, "client_error", self._clean(message))
        return record

    async def _send_once(self, session: aiohttp.ClientSession, request: ClientRequest) -> RequestRecord:
        tally = StreamTally()
        stream = _Stream(tally, self._max_line_bytes, self._max_body_bytes)
        stamp = {"sent_ns": time.perf_counter_ns()}  # replaced when the request headers are on the socket
        url = self.base_url + request.path
        deadline: asyncio.Timeout | None = None
        kind: str | None
        message: str | None
        try:
            await self._gate.turn()
            stamp["sent_ns"] = time.perf_counter_ns()  # after the gate; the headers-sent hook refines it
            headers = {"X-Request-Id": request.request_id}
            async with asyncio.timeout(self._deadline_s) as deadline:
                for _ in range(MAX_REDIRECTS + 1):
                    post = session.post(
                        url,
                        data=request.encoded_body(),
                        headers=headers,
                        trace_request_ctx=stamp,
                        allow_redirects=False,
                    )
                    async with post as response:
                        stamp["answered"] = True
                        if 300 <= response.status < 400:
                            url, refused = self._redirect(url, response)
                            if refused is not None:
                                return self._redirect_error(
                                    request, response.status, stamp["sent_ns"], refused
                                )
                            continue
                        if response.status >= 400:
                            return await self._http_error(request, response, stamp["sent_ns"])
                        encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
                        if encoding not in ("identity", ""):
                            kind, message = "malformed", _COMPRESSED.format(encoding[:40])
                            break
                        stalls = self._stalls if self._own_stall_timer else None
                        reading = _read_stream(response, stream, self._deferred, self._arrivals, stalls)
                        kind, message = await reading
                        break
                else:
                    kind, message = "redirect", f"more than {MAX_REDIRECTS} redirects"
        except asyncio.CancelledError:
            kind, message = "cancelled", "interrupted before it finished"
            if deadline is not None and deadline.expired():  # the deadline's cancel, caught inside
                kind, message = "deadline", f"not finished within the deadline of {self._deadline_s:g} s"
        except (TimeoutError, aiohttp.ServerTimeoutError) as exc:
            if deadline is not None and deadline.expired():
                kind, message = "deadline", f"not finished within the deadline of {self._deadline_s:g} s"
            else:
                kind, message = "timeout", f"no byte for {self._stall_timeout_s:g} s ({type(exc).__name__})"
        except aiohttp.ClientPayloadError as exc:
            kind, message = "dropped", f"connection closed mid-stream ({type(exc).__name__})"
        except aiohttp.ClientResponseError as exc:  # aiohttp's HTTP parser refused the head or framing
            kind, message = "malformed", f"not valid HTTP: {exc.message}"
        except (aiohttp.ClientConnectionError, OSError) as exc:
            self._deferred.run()  # what arrived before the failure decides "dropped" versus "connect"
            kind, message = _connection_failure(tally, exc, stamp)
        return self._record(request, tally, stamp["sent_ns"], kind, self._clean(message))

    def _redirect(self, url: str, response: aiohttp.ClientResponse) -> tuple[str, str | None]:
        """Where a 3xx leads when it may be followed, else (url, why not): the one line to record."""
        location = response.headers.get("Location", "")
        try:
            target = str(response.url.join(yarl.URL(location))) if location else ""
        except ValueError:
            target = ""
        if self._follow_redirects and target and same_origin(url, target):
            return target, None
        refused = redirect_refused(url, response.status, target, followed_same_origin=self._follow_redirects)
        return url, refused

    def _redirect_error(
        self, request: ClientRequest, status: int, sent_ns: int, message: str
    ) -> RequestRecord:
        record = self._record(request, StreamTally(), sent_ns, "redirect", self._clean(message))
        record.http_status = status
        return record

    async def _http_error(self, request: ClientRequest, response: aiohttp.ClientResponse, sent_ns: int):
        status = response.status
        kind = "http_429" if status == 429 else "http_4xx" if status < 500 else "http_5xx"
        try:  # the start of the body only: an error page can be of any size
            text = (await response.content.read(ERROR_BODY_BYTES)).decode("utf-8", errors="replace")[:300]
        except aiohttp.ClientError:
            text = ""
        message = _error_message(text) or response.reason or ""
        retry = response.headers.get("Retry-After")
        if retry:
            message += f" (Retry-After: {retry})"
        record = self._record(request, StreamTally(), sent_ns, kind, self._clean(f"HTTP {status}: {message}"))
        record.http_status = status
        return record

    def _record(
        self, request: ClientRequest, tally: StreamTally, sent_ns: int, kind: str | None, message: str | None
    ) -> RequestRecord:
        self._deferred.run()  # whatever this answer's stream still had queued
        try:
            tally.settle()
        except MalformedEvent as exc:
            kind, message = kind or "malformed", message or self._clean(str(exc))
        if kind is None and tally.bad_text is not None:
            kind, message = "malformed", self._clean(tally.bad_text)
        record = RequestRecord(
            target_index=request.target_index,
            level=request.level,
            repeat=request.repeat,
            request_index=request.request_index,
            phase=request.phase,
            status="ok" if kind is None else "error",
            sent_ns=sent_ns,
            end_ns=time.perf_counter_ns(),
            intended_ns=request.intended_ns,
            first_token_ns=tally.first_token_ns,
            error_kind=kind,
            error=message,
            max_tokens=request.max_tokens,
            finish_reason=tally.finish_reason,
            chunk_ns=tally.chunk_ns,
            chunk_tokens=tally.chunk_tokens,
            server_timings=tally.timings,
            chunk_tokens_source=tally.chunk_tokens_source,
            expected_prompt_tokens=request.expected_prompt_tokens,
            expected_cached_tokens=request.expected_cached_tokens,
            request_id=request.request_id,
        )
        try:
            count_tokens(record, tally, request.ignore_eos)
        except MalformedEvent as exc:  # a count out of range: the streamed chunks are all there is
            record.output_tokens, record.tokens_source, record.server_timings = (
                sum(tally.chunk_tokens),
                "client",
                None,
            )
            if record.status == "ok":
                record.status, record.error_kind, record.error = "error", "malformed", self._clean(str(exc))
        return record

    def _clean(self, message: str | None) -> str | None:
        if message is None:
            return None
        return storable_text(redact_text(message, self._secrets)[:300])


async def _stamp_headers_sent(session: Any, context: Any, params: Any) -> None:
    """aiohttp trace hook: the request is on the wire (headers written; a body follows at once)."""
    context.trace_request_ctx["sent_ns"] = time.perf_counter_ns()


async def _mark_reused(session: Any, context: Any, params: Any) -> None:
    context.trace_request_ctx["reused"] = True


class _Stream:
    """One answer being parsed: SSE events into the tally, and how the answer ended once that is known."""

    def __init__(
        self,
        tally: StreamTally,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        authorization: str | None = None,
        secrets: tuple[str, ...] = (),
    ) -> None:
        self.tally = tally
        self.parser = SseParser(max_line_bytes)
        self.body_left = max_body_bytes  # bytes this answer may still send
        self.outcome: tuple[str | None, str | None] | None = None  # (error kind, message); (None, None): done
        self.on_outcome: Any = None  # called once the outcome is known (wakes the waiting reader)
        self._scan = _SCAN
        self._fast = _fast_loads

    def feed(self, chunk: bytes, t_ns: int) -> None:
        if self.outcome is not None:
            return
        self.body_left -= len(chunk)
        if self.body_left < 0:
            self._settle(("too_large", "the body is longer than the client's limit (--max-body-bytes)"))
            return
        try:
            one = (
                chunk.startswith(b"data: {")
                and chunk.find(b"\n") == len(chunk) - 2
                and chunk.endswith(b"\n\n")
            )
            if (
                one and not self.parser.pending and b"\r" not in chunk
            ):  # one JSON event on one line: the usual read
                self._json_event(chunk, t_ns)
                return
            if self.parser.pending or not chunk.endswith(b"\n\n") or b"\r" in chunk:
                for event in self.parser.feed(chunk, t_ns):
                    if self._settle(self._event(event.data, event.t_ns)):
                        return
                return
            for block in chunk[:-2].split(b"\n\n"):  # whole events only (the usual read): no line machinery
                if block.startswith(b"data: ") and b"\n" not in block:
                    if self._settle(self._event(block[6:].decode("utf-8", errors="replace"), t_ns)):
                        return
                elif block:  # comments, several fields: the general parser, one complete block at a time
                    for event in self.parser.feed(block + b"\n\n", t_ns):
                        if self._settle(self._event(event.data, event.t_ns)):
                            return
        except MalformedEvent as exc:  # a value of the wrong type, range or size
            self._settle(("malformed", str(exc)))
        except SseTooLarge as exc:
            self._settle(("too_large", f"{exc} (--max-line-bytes)"))

    def _json_event(self, chunk: bytes, t_ns: int) -> None:
        """``_event`` for one whole ``data: {...}\\n\\n`` read, in fewer steps: orjson (or json's C scanner)
        takes the object whole; anything else (invalid UTF-8, NaN, huge integers, trailing data, not an
        object, a read over FAST_MAX_BYTES) goes the general way, where json decides exactly as before."""
        decoded = None
        if self._fast is not None and len(chunk) <= FAST_MAX_BYTES:
            try:
                decoded = self._fast(memoryview(chunk)[6:-2])
            except ValueError:  # orjson.JSONDecodeError is a ValueError
                decoded = None
        else:
            data = chunk[6:-2].decode("utf-8", errors="replace")
            try:
                decoded, end = self._scan(data, 0)
            except (StopIteration, ValueError, RecursionError):
                end = -1
            if end != len(data):
                decoded = None
        if type(decoded) is not dict:
            self._settle(self._event(chunk[6:-2].decode("utf-8", errors="replace"), t_ns))
            return
        tally = self.tally
        tally.add(decoded, t_ns)
        # orjson refuses lone surrogates; json's scanner (without orjson, or over FAST_MAX_BYTES) takes them
        scanned = self._fast is None or len(chunk) > FAST_MAX_BYTES
        if scanned and b"\\u" in chunk:
            tally.check_text(decoded)
        if tally.server_error is not None:
            self._settle(("http_5xx", f"error inside the stream: {tally.server_error}"))

    def _settle(self, outcome: tuple[str | None, str | None] | None) -> bool:
        if outcome is None:
            return False
        self.outcome = outcome
        if self.on_outcome is not None:
            self.on_outcome()
        return True

    def _event(self, data: str, t_ns: int) -> tuple[str | None, str | None] | None:
        if data == "[DONE]":
            self.tally.done = True
            return None, None
        try:
            decoded, end = self._scan(data, 0)  # json's C scanner, without json.loads' Python wrappers
        except (StopIteration, ValueError, RecursionError):
            end = -1
        if end != len(data):  # leading/trailing whitespace, or not JSON: json.loads decides, exactly
            try:
                decoded = json.loads(data)
            except (ValueError, RecursionError) as exc:  # also nesting too deep, a 5,000-digit integer
                return "malformed", f"not JSON ({type(exc).__name__}): {data[:80]!r}"
        if not isinstance(decoded, dict):
            return "malformed", f"not a JSON object: {data[:80]!r}"
        self.tally.add(decoded, t_ns)
        if "\\u" in data:  # an escape: perhaps a lone surrogate in the answer's text
            self.tally.check_text(decoded)
        if self.tally.server_error is not None:
            return "http_5xx", f"error inside the stream: {self.tally.server_error}"
        return None

    def fail(self, exc: Exception) -> None:
        """An unexpected exception while parsing this answer: it ends as ``client_error``."""
        if self.outcome is None:
            self._settle(("client_error", f"{type(exc).__name__}: {exc}"))

    def ended(self) -> tuple[str | None, str | None]:
        """How the answer ended, once the body is over."""
        if self.outcome is not None:
            return self.outcome
        if self.parser.pending:
            return "malformed", "stream ended inside an event"
        return (
            (None, None)
            if self.tally.finished
            else ("dropped", "stream ended before [DONE] or a finish_reason")
        )


class _DeferredParse:
    """Stamp now, parse a moment later: every stream woken in this loop iteration takes its timestamp
    first, and the parsing runs in a callback queued behind them. Otherwise each stream's stamp would
    wait for the parsing of all the streams resumed before it."""

    def __init__(self) -> None:
        self._pending: list[tuple[_Stream, bytes, int]] = []
        self._scheduled = False

    def add(self, stream: _Stream, chunk: bytes, t_ns: int) -> None:
        self._pending.append((stream, chunk, t_ns))
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self.run)

    def run(self) -> None:
        self._scheduled = False
        pending, self._pending = self._pending, []
        for stream, chunk, t_ns in pending:
            try:
                stream.feed(chunk, t_ns)
            except Exception as exc:  # one answer's surprise ends that answer, not the others queued here
                stream.fail(exc)


async def _read_stream(
    response: aiohttp.ClientResponse,
    stream: _Stream,
    deferred: _DeferredParse,
    arrivals: ArrivalLog | None,
    stalls: StallWatch | None,
) -> tuple[str | None, str | None]:
    """Consume the SSE body; (error kind, message), or (None, None) when it ended properly.

    The body's reads go from aiohttp's protocol callback straight to the deferred parser (_BodySink): no
    task wakes up per read. This coroutine only waits for the end: EOF, a connection error, or an event
    that settles the outcome ([DONE] before EOF, an error event, malformed data). Once the headers are in,
    the client's StallWatch (``stalls``, when given) replaces aiohttp's per-read timeout (a timer restarted
    on every read). Without ``arrivals`` (aiohttp_edge found the internals missing) it reads the plain way.
    """
    reader = response.content
    if arrivals is None:
        return await _read_plain(reader, stream, deferred)
    sink = _BodySink(stream, deferred, asyncio.get_running_loop().create_future())
    head = arrivals.watch_sink(reader, sink)
    try:
        if head is None:  # this response's reader cannot be switched: read it the plain way
            return await _read_plain(reader, stream, deferred)
        if head[0]:
            deferred.add(stream, head[0], head[1])
        error = reader.exception()
        if error is not None:
            raise error
        if not reader.is_eof():
            stream.on_outcome = sink.settled
            if stalls is not None:
                _watch_stalls(response, sink, stalls)
            await sink.done
        if stream.outcome == (None, None) and not reader.is_eof():  # [DONE]: the body's end follows at once;
            await _eof_or_grace(reader)  # reading it keeps the connection reusable
    finally:
        if stalls is not None:
            stalls.forget(sink)
        arrivals.forget(reader)
        stream.on_outcome = None
    deferred.run()
    return stream.ended()


def _watch_stalls(response: aiohttp.ClientResponse, sink: _BodySink, stalls: StallWatch) -> None:
    """Hand the body's stall timeout from aiohttp (per read) to ``stalls`` (one timer per client)."""
    if not drop_read_timeout(response):
        return  # no per-read timeout to replace
    stalls.watch(sink, functools.partial(_stalled, response, sink, stalls.stall_ns / 1e9))


def _stalled(response: aiohttp.ClientResponse, sink: _BodySink, stall_s: float) -> None:
    sink.closed(stall_error(f"no byte for {stall_s:g} s"))  # the reader sees aiohttp's own timeout
    response.close()  # and the connection, mid-answer, is not reused


async def _eof_or_grace(reader: aiohttp.StreamReader, grace_s: float = 0.05) -> None:
    with contextlib.suppress(TimeoutError, aiohttp.ClientError):
        await asyncio.wait_for(reader.wait_eof(), grace_s)


async def _read_plain(
    reader: aiohttp.StreamReader, stream: _Stream, deferred: _DeferredParse
) -> tuple[str | None, str | None]:
    """The public path: aiohttp buffers, this coroutine reads and stamps each read when it gets it."""
    async for chunk in reader.iter_any():
        deferred.add(stream, chunk, time.perf_counter_ns())
        if stream.outcome is not None:
            break
    deferred.run()
    return stream.ended()


class _BodySink:
    """Where aiohttp's protocol delivers one body (aiohttp_edge.ArrivalLog.watch_sink): each read goes to the
    deferred parser with its arrival time; ``done`` resolves at EOF or the outcome, fails on an error."""

    __slots__ = ("arrived", "done", "last_ns")

    def __init__(self, stream: _Stream, deferred: _DeferredParse, done: asyncio.Future) -> None:
        self.arrived = functools.partial(deferred.add, stream)  # arrived(data, t_ns), one Python frame fewer
        self.done = done
        self.last_ns = 0  # the last arrival (perf_counter_ns), for StallWatch

    def closed(self, exc: BaseException | None) -> None:
        if self.done.done():
            return
        if exc is None:
            self.done.set_result(None)
        else:
            self.done.set_exception(exc)

    def settled(self) -> None:
        self.closed(None)


def _connection_failure(tally: StreamTally, exc: BaseException, stamp: dict) -> tuple[str, str]:
    if tally.chunk_ns or tally.finish_reason:  # the answer had begun: the connection dropped mid-stream
        return "dropped", f"connection lost mid-stream ({type(exc).__name__})"
    # writing to a socket the server had closed: the request never reached it (a reset while waiting for
    # the answer is ServerDisconnectedError instead, and counts)
    unsent = stamp.get("reused") and not stamp.get("answered") and isinstance(exc, aiohttp.ClientOSError)
    prefix = STALE_PREFIX if unsent else ""
    return "connect", f"{prefix}{type(exc).__name__}: {exc}"


def _error_message(text: str) -> str:
    try:
        body = json.loads(text)
    except (ValueError, RecursionError):
        return text.strip()[:200]
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        return str(error.get("message") or error)[:200]
    return str(error or body)[:200]

"""Synchronous HTTP (stdlib urllib) for the reads that happen outside async work: engine endpoints, health
checks while an engine starts, Hugging Face range reads.

One error mapping for all of them: a status code is an answer (``Answer.status``), never an exception; a peer
that cannot be reached (refused, timed out, reset, not speaking HTTP) is a TargetError naming the URL without
credentials; a URL urllib cannot use is a ConfigError. Loopback hosts bypass any configured proxy.

Redirects (``redirects``): ``"refuse"`` (the default) makes a 3xx a TargetError that shows where it pointed
(credentials and query left out), so no read goes anywhere the user did not name; ``"same-origin"`` follows one
to the same scheme, host and port only; ``"any"`` follows it anywhere (the Hugging Face hub's CDN). Either way
``private_headers`` (credentials) never travel with a redirect.

Bounded: ``timeout_s`` covers the whole request (connect, status line, headers, body), not each read: every
socket read of the answer waits only for what is left of the deadline (``_DeadlineReader``), so a server
dripping its headers or its body a byte at a time is cut off at the deadline. A body over ``max_bytes`` is a
TargetError, never read whole into memory.
"""

from __future__ import annotations

import functools
import http.client
import io
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from email.message import Message
from typing import Literal

from servelab.errors import ConfigError, TargetError
from servelab.net import is_loopback_url, public_url

DEFAULT_MAX_BYTES = 16 << 20  # an endpoint's body (/v1/models, /props ...): real ones are a few KiB
READ_CHUNK = 1 << 16
Redirects = Literal["refuse", "same-origin", "any"]


@dataclass(frozen=True)
class Answer:
    """What the server answered: its status, the body (empty for an error status) and the headers."""

    status: int
    body: bytes = b""
    headers: Message = field(default_factory=Message, repr=False)

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300


def same_origin(url: str, other: str) -> bool:
    """Same scheme, host and port (the port a scheme implies counts as given)."""
    try:
        a, b = urllib.parse.urlsplit(url), urllib.parse.urlsplit(other)
        ports = (a.port or _default_port(a.scheme), b.port or _default_port(b.scheme))
    except ValueError:
        return False
    return a.scheme == b.scheme and (a.hostname or "") == (b.hostname or "") and ports[0] == ports[1]


def _default_port(scheme: str) -> int | None:
    return {"http": 80, "https": 443}.get(scheme)


def redirect_refused(url: str, status: int, location: str, *, followed_same_origin: bool = False) -> str:
    """The one line for a redirect not followed: where it pointed, without credentials or query."""
    try:
        where = public_url(location) if location else "a missing or unusable Location"
    except ValueError:  # e.g. an unclosed IPv6 bracket
        where = "an unusable Location"
    rule = (
        "only redirects to the same host and port are followed"
        if followed_same_origin
        else "redirects are not followed"
    )
    return f"{public_url(url)} answered HTTP {status}, a redirect to {where}; {rule}"


class _Redirects(urllib.request.HTTPRedirectHandler):
    def __init__(self, rule: Redirects, origin: str) -> None:
        self.rule, self.origin = rule, origin

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        if self.rule == "any" or (self.rule == "same-origin" and same_origin(self.origin, newurl)):
            return super().redirect_request(req, fp, code, msg, headers, newurl)
        fp.close()
        raise TargetError(
            redirect_refused(req.full_url, code, newurl, followed_same_origin=self.rule == "same-origin")
        )

    def http_error_302(self, req, fp, code, msg, headers):
        try:
            return super().http_error_302(req, fp, code, msg, headers)
        except ValueError:  # urllib could not read the Location (an unclosed IPv6 bracket ...)
            fp.close()
            raise TargetError(redirect_refused(req.full_url, code, "")) from None

    http_error_301 = http_error_303 = http_error_307 = http_error_308 = http_error_302


def request(
    url: str,
    *,
    body: bytes | None = None,
    headers: Mapping[str, str] | None = None,
    private_headers: Mapping[str, str] | None = None,
    timeout_s: float = 5.0,
    limit: int | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    redirects: Redirects = "refuse",
    hint: str = "",
) -> Answer:
    """GET (POST when ``body`` is given) ``url``; at most ``limit`` body bytes are read (the rest ignored),
    else the whole body, which must fit ``max_bytes``; all within ``timeout_s``.

    ``hint`` ends the TargetError's message (what to check when the server cannot be reached).
    """
    try:
        req = urllib.request.Request(url, data=body, method="POST" if body is not None else "GET")
        urllib.parse.urlsplit(url).port  # noqa: B018 - raises ValueError for a port outside 0-65535
    except ValueError as exc:
        raise ConfigError(f"not a usable URL: {public_url(url)!r} ({exc})") from None
    if req.type not in ("http", "https"):
        raise ConfigError(f"not a usable URL: {public_url(url)!r} (only http and https)")
    for name, value in (headers or {}).items():
        req.add_header(name, value)
    for name, value in (private_headers or {}).items():
        req.add_unredirected_header(name, value)
    deadline = time.monotonic() + timeout_s
    try:
        with _opener(url, redirects, deadline, timeout_s).open(req, timeout=timeout_s) as response:
            if limit == 0:
                return Answer(response.status, b"", response.headers)
            data = _read_body(response, url, limit if limit is not None else max_bytes, deadline, timeout_s)
            if limit is not None:
                data = data[:limit]
            elif len(data) > max_bytes:
                raise TargetError(f"{public_url(url)} answered more than {max_bytes} bytes; not read further")
            return Answer(response.status, data, response.headers)
    except urllib.error.HTTPError as exc:
        exc.close()
        if 300 <= exc.code < 400:  # a redirect urllib could not take (no Location): still not an answer
            raise TargetError(redirect_refused(url, exc.code, "")) from None
        return Answer(exc.code, b"", exc.headers)
    except (OSError, http.client.HTTPException) as exc:  # URLError, timeouts, resets, non-HTTP peers
        reason = getattr(exc, "reason", exc)
        raise TargetError(f"cannot reach {public_url(url)}: {reason}{'; ' + hint if hint else ''}") from exc


def _read_body(response, url: str, most: int, deadline: float, timeout_s: float) -> bytes:
    """Up to ``most`` + 1 bytes (one more tells "too long"), read in pieces against the deadline."""
    parts: list[bytes] = []
    size = 0
    while size <= most:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TargetError(f"{public_url(url)} did not finish answering within {timeout_s:g} s")
        piece = response.read1(min(READ_CHUNK, most + 1 - size))
        if not piece:
            break
        parts.append(piece)
        size += len(piece)
    return b"".join(parts)


class _DeadlineReader(io.RawIOBase):
    """A response's socket file, read with the socket timeout set to what is left of the deadline each time.

    It wraps the file http.client made (which keeps the socket open after urllib closes the connection)."""

    def __init__(self, raw: io.RawIOBase, sock: socket.socket, deadline: float, timeout_s: float) -> None:
        super().__init__()
        self._raw, self._sock, self._deadline, self._timeout_s = raw, sock, deadline, timeout_s

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int | None:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"timed out: no whole answer within {self._timeout_s:g} s")
        self._sock.settimeout(left)
        try:
            return self._raw.readinto(buffer)
        except TimeoutError:
            raise TimeoutError(f"timed out: no whole answer within {self._timeout_s:g} s") from None

    def close(self) -> None:
        self._raw.close()
        super().close()


class _DeadlineResponse(http.client.HTTPResponse):
    """An HTTPResponse whose status line, headers and body are all read against one deadline."""

    def __init__(self, sock: socket.socket, *args, deadline: float, timeout_s: float, **kwargs) -> None:
        super().__init__(sock, *args, **kwargs)
        raw = self.fp.detach()  # nothing read yet: the socket file gets a bounded buffer instead
        self.fp = io.BufferedReader(_DeadlineReader(raw, sock, deadline, timeout_s))


class _DeadlineMixin(urllib.request.AbstractHTTPHandler):
    deadline = 0.0
    timeout_s = 0.0

    def do_open(self, http_class, req, **http_conn_args):
        def connection(host, **kwargs):
            conn = http_class(host, **kwargs)
            conn.response_class = functools.partial(
                _DeadlineResponse, deadline=self.deadline, timeout_s=self.timeout_s
            )
            return conn

        return super().do_open(connection, req, **http_conn_args)


class _DeadlineHTTP(_DeadlineMixin, urllib.request.HTTPHandler):
    pass


class _DeadlineHTTPS(_DeadlineMixin, urllib.request.HTTPSHandler):
    pass


def _opener(
    url: str, redirects: Redirects, deadline: float, timeout_s: float
) -> urllib.request.OpenerDirector:
    handlers: list[urllib.request.BaseHandler] = [_Redirects(redirects, url)]
    for handler in (_DeadlineHTTP(), _DeadlineHTTPS()):
        handler.deadline, handler.timeout_s = deadline, timeout_s
        handlers.append(handler)
    if is_loopback_url(url):
        handlers.append(urllib.request.ProxyHandler({}))
    return urllib.request.build_opener(*handlers)

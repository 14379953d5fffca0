"""Synchronous HTTP (stdlib urllib) for the reads that happen outside async work: engine endpoints, health
checks while an engine starts, Hugging Face range reads.

One error mapping for all of them: a status code is an answer (``Answer.status``), never an exception; a peer
that cannot be reached (refused, timed out, reset, not speaking HTTP) is a TargetError naming the URL without
credentials; a URL urllib cannot use is a ConfigError. Loopback hosts bypass any configured proxy. Redirects
are followed only when asked, and ``private_headers`` (credentials) never travel with one.
"""

from __future__ import annotations

import http.client
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from email.message import Message

from servelab.errors import ConfigError, TargetError
from servelab.net import is_loopback_url, public_url


@dataclass(frozen=True)
class Answer:
    """What the server answered: its status, the body (empty for an error status) and the headers."""

    status: int
    body: bytes = b""
    headers: Message = field(default_factory=Message, repr=False)

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None  # the 3xx comes back as the answer


def request(
    url: str,
    *,
    body: bytes | None = None,
    headers: Mapping[str, str] | None = None,
    private_headers: Mapping[str, str] | None = None,
    timeout_s: float = 5.0,
    limit: int | None = None,
    follow_redirects: bool = False,
    hint: str = "",
) -> Answer:
    """GET (POST when ``body`` is given) ``url``; at most ``limit`` body bytes are read.

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
    try:
        with _opener(url, follow_redirects).open(req, timeout=timeout_s) as response:
            data = response.read(limit) if limit is not None else response.read()
            return Answer(response.status, data, response.headers)
    except urllib.error.HTTPError as exc:
        exc.close()
        return Answer(exc.code, b"", exc.headers)
    except (OSError, http.client.HTTPException) as exc:  # URLError, timeouts, resets, non-HTTP peers
        reason = getattr(exc, "reason", exc)
        raise TargetError(f"cannot reach {public_url(url)}: {reason}{'; ' + hint if hint else ''}") from exc


def _opener(url: str, follow_redirects: bool) -> urllib.request.OpenerDirector:
    handlers: list[urllib.request.BaseHandler] = [] if follow_redirects else [_NoRedirect()]
    if is_loopback_url(url):
        handlers.append(urllib.request.ProxyHandler({}))
    return urllib.request.build_opener(*handlers)

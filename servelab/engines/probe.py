"""Synchronous HTTP reads of an engine's own endpoints, shared by every engine's ``endpoints.py``.

Stdlib only (urllib), so any layer can call it before starting async work. The API key goes in the
Authorization header and nowhere else: error messages name the URL without credentials, never the key.
Redirects are not followed (a redirect could carry the key to another host).
"""

from __future__ import annotations

import base64
import http.client
import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from servelab.errors import ConfigError, TargetError
from servelab.net import is_loopback_url, public_url


@dataclass(frozen=True)
class DetectedEngine:
    """Which engine answers at a URL, as read from its own endpoints."""

    name: str  # one of servelab.engines.ENGINES
    version: str | None
    models: tuple[str, ...]
    raw: dict[str, Any] = field(default_factory=dict)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


@dataclass(frozen=True)
class HttpProbe:
    """GETs and POSTs JSON or text under one base URL. Missing endpoints read as ``None``."""

    base_url: str
    api_key: str | None = None
    timeout_s: float = 5.0
    basic_auth: str | None = field(
        default=None, repr=False
    )  # from user:password in the URL (urllib ignores it)

    def __post_init__(self) -> None:
        try:
            parts = urllib.parse.urlsplit(self.base_url)
        except ValueError as exc:  # e.g. an unclosed IPv6 bracket
            raise ConfigError(f"not a valid URL ({exc}); use e.g. http://127.0.0.1:8080") from None
        try:
            parts.port  # noqa: B018 - urllib raises ValueError here for a port outside 0-65535
        except ValueError:
            raise ConfigError(
                f"the port of {parts.hostname}'s URL is outside 1-65535; use e.g. http://127.0.0.1:8080"
            ) from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(
                f"not an http(s) URL: {public_url(self.base_url)!r}; use e.g. http://127.0.0.1:8080"
            )
        if parts.username is not None:
            user = urllib.parse.unquote(parts.username) + ":" + urllib.parse.unquote(parts.password or "")
            object.__setattr__(self, "basic_auth", base64.b64encode(user.encode()).decode())
            object.__setattr__(self, "base_url", public_url(self.base_url) + _query(parts))
        object.__setattr__(self, "base_url", self.base_url.rstrip("/"))

    def get_json(self, path: str) -> Any | None:
        return _parse_json(self._request(path, None))

    def post_json(self, path: str, body: dict[str, Any]) -> Any | None:
        return _parse_json(self._request(path, json.dumps(body).encode()))

    def get_text(self, path: str) -> str | None:
        data = self._request(path, None)
        return None if data is None else data.decode("utf-8", errors="replace")

    def status(self, path: str) -> int:
        """The HTTP status of a GET (TargetError when unreachable)."""
        try:
            self._request(path, None, raise_status=True)
        except urllib.error.HTTPError as exc:
            return exc.code
        return 200

    def _request(self, path: str, body: bytes | None, raise_status: bool = False) -> bytes | None:
        """The body of a 2xx answer; None for any HTTP error status; TargetError when unreachable."""
        url = self.base_url + path
        request = urllib.request.Request(url, data=body, method="POST" if body is not None else "GET")
        request.add_header("Accept", "application/json, text/plain")
        if body is not None:
            request.add_header("Content-Type", "application/json")
        if self.api_key:
            request.add_header("Authorization", f"Bearer {self.api_key}")
        elif self.basic_auth:
            request.add_header("Authorization", f"Basic {self.basic_auth}")
        try:
            with self._opener().open(request, timeout=self.timeout_s) as response:
                return response.read()
        except urllib.error.HTTPError as exc:
            if raise_status:
                raise
            if exc.code in (401, 403):
                raise TargetError(
                    f"{public_url(url)} refused access (HTTP {exc.code}); pass the server's key with --api-key"
                ) from exc
            return None
        except (OSError, http.client.HTTPException) as exc:  # URLError, timeouts, resets, non-HTTP peers
            reason = getattr(exc, "reason", exc)
            raise TargetError(
                f"cannot reach {public_url(self.base_url)}: {reason}; is the server running?"
            ) from exc

    def _opener(self) -> urllib.request.OpenerDirector:
        handlers: list[urllib.request.BaseHandler] = [_NoRedirect()]
        if is_loopback_url(self.base_url):
            handlers.append(urllib.request.ProxyHandler({}))
        return urllib.request.build_opener(*handlers)


def _query(parts: urllib.parse.SplitResult) -> str:
    return f"?{parts.query}" if parts.query else ""


def _parse_json(data: bytes | None) -> Any | None:
    if data is None:
        return None
    try:
        return json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None

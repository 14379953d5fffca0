"""Synchronous HTTP reads of an engine's own endpoints, shared by every engine's ``endpoints.py``.

Requests go through servelab.sync_http (stdlib urllib), so any layer can call it before async work. The API
key goes in the Authorization header and nowhere else: error messages name the URL without credentials, never
the key. A redirect is not followed (it could carry the key, or the probes, to another host): it is a
TargetError naming where it pointed, without credentials (sync_http).
"""

from __future__ import annotations

import base64
import json
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

from servelab import sync_http
from servelab.errors import ConfigError, TargetError
from servelab.net import public_url


@dataclass(frozen=True)
class DetectedEngine:
    """Which engine answers at a URL, as read from its own endpoints."""

    name: str  # an engine name from servelab.engines.registry
    version: str | None
    models: tuple[str, ...]
    raw: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class HttpProbe:
    """GETs and POSTs JSON or text under one base URL. Missing endpoints read as ``None``."""

    base_url: str
    api_key: str | None = None
    timeout_s: float = 5.0  # the whole request, not each read
    max_bytes: int = sync_http.DEFAULT_MAX_BYTES  # a longer body is a TargetError
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

    @property
    def authorization(self) -> str | None:
        """The Authorization header every request to this server carries (the bench load as well)."""
        if self.api_key:
            return f"Bearer {self.api_key}"
        return f"Basic {self.basic_auth}" if self.basic_auth else None

    @property
    def secrets(self) -> tuple[str, ...]:
        """What must never be printed or stored: the key, the basic-auth token and the password in it."""
        found = [self.api_key or "", self.basic_auth or ""]
        if self.basic_auth:
            found.append(base64.b64decode(self.basic_auth).decode(errors="replace").partition(":")[2])
        return tuple(s for s in found if s)

    def get_json(self, path: str) -> Any | None:
        return _parse_json(self._request(path, None))

    def post_json(self, path: str, body: dict[str, Any]) -> Any | None:
        return _parse_json(self._request(path, json.dumps(body).encode()))

    def get_text(self, path: str) -> str | None:
        data = self._request(path, None)
        return None if data is None else data.decode("utf-8", errors="replace")

    def status(self, path: str) -> int:
        """The HTTP status of a GET (TargetError when unreachable)."""
        return self._answer(path, None).status

    def _request(self, path: str, body: bytes | None) -> bytes | None:
        """The body of a 2xx answer; None for any other status; TargetError when refused or unreachable."""
        answer = self._answer(path, body)
        if answer.status in (401, 403):
            raise TargetError(
                f"{public_url(self.base_url + path)} refused access (HTTP {answer.status}); "
                "pass the server's key with --api-key"
            )
        return answer.body if answer.ok else None

    def _answer(self, path: str, body: bytes | None) -> sync_http.Answer:
        headers = {"Accept": "application/json, text/plain"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        auth = self.authorization
        return sync_http.request(
            self.base_url + path,
            body=body,
            headers=headers,
            private_headers={"Authorization": auth} if auth else None,
            timeout_s=self.timeout_s,
            max_bytes=self.max_bytes,
            hint="is the server running?",
        )


def _query(parts: urllib.parse.SplitResult) -> str:
    return f"?{parts.query}" if parts.query else ""


def _parse_json(data: bytes | None) -> Any | None:
    if data is None:
        return None
    try:
        return json.loads(data)
    except (ValueError, RecursionError):  # not JSON, not UTF-8, nested too deep, a 5,000-digit integer
        return None

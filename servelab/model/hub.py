"""`--hf`: a model's config.json and safetensors headers from a Hugging Face–style hub, by HTTP range requests.

Files are read from `{endpoint}/{repo}/resolve/main/{file}`; the endpoint is the argument, else $HF_ENDPOINT,
else https://huggingface.co. Each shard costs two small requests (`Range: bytes=0-7`, then the header);
weights are never downloaded. $HF_TOKEN (or `token`) is sent as a bearer token and never logged or echoed.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import Any

from servelab import sync_http
from servelab.errors import ConfigError, ModelFormatError, TargetError
from servelab.model.hf_config import spec_from_config
from servelab.model.safetensors_header import (
    TensorEntry,
    apply_headers,
    header_length,
    parse_header,
    shard_names,
)
from servelab.model.spec import ModelSpec

DEFAULT_ENDPOINT = "https://huggingface.co"
_REPO = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")
_TIMEOUT_S = 30.0
MAX_JSON_BYTES = 16 * 1024 * 1024  # config.json and the shard index are kilobytes to a few MB


@dataclass(frozen=True)
class HubClient:
    """Reads files of one repository; `token` goes only into the Authorization header."""

    endpoint: str
    repo: str
    token: str | None = field(default=None, repr=False)
    revision: str = "main"

    def url(self, filename: str) -> str:
        return f"{self.endpoint.rstrip('/')}/{self.repo}/resolve/{self.revision}/{filename}"

    def get(
        self, filename: str, byte_range: tuple[int, int] | None = None, limit: int | None = None
    ) -> tuple[bytes, int]:
        """The body (at most `limit` bytes) and the file's total size (from Content-Range or Content-Length)."""
        headers = {"Range": f"bytes={byte_range[0]}-{byte_range[1]}"} if byte_range else {}
        # unredirected: the hub redirects to a CDN with signed URLs, which must not see the token
        token = {"Authorization": f"Bearer {self.token}"} if self.token else None
        start = byte_range[0] if byte_range else 0
        try:
            answer = sync_http.request(
                self.url(filename),
                headers=headers,
                private_headers=token,
                timeout_s=_TIMEOUT_S,
                limit=None if limit is None else start + limit,
                redirects="any",  # the hub sends range reads on to its CDN
                hint="check the network, or set HF_ENDPOINT",
            )
        except TargetError as exc:  # a wrong HF_ENDPOINT is a usage error (exit 2)
            raise ConfigError(str(exc)) from None
        if not answer.ok:
            raise _http_error(self, filename, answer.status)
        body = answer.body[start if answer.status == 200 else 0 :]  # 200: the Range was ignored, whole file
        return (body if limit is None else body[:limit]), _total_size(answer.headers, len(answer.body))

    def exists(self, filename: str) -> bool:
        try:
            self.get(filename, (0, 0), limit=1)
        except ConfigError as exc:
            if "not found" in str(exc):
                return False
            raise
        return True


def _total_size(headers: Any, body_len: int) -> int:
    content_range = headers.get("Content-Range") or ""
    match = re.fullmatch(r"bytes \d+-\d+/(\d+)", content_range.strip())
    if match:
        return int(match.group(1))
    return int(headers.get("Content-Length") or body_len)


def _http_error(client: HubClient, filename: str, status: int) -> ConfigError:
    if status == 404:
        return ConfigError(
            f"{filename} not found in {client.repo} at {client.endpoint} (HTTP 404); check the repo id"
        )
    if status in (401, 403):
        return ConfigError(
            f"{client.endpoint} refused {client.repo}/{filename} (HTTP {status}); for gated models "
            "accept the licence and set HF_TOKEN"
        )
    return ConfigError(f"{client.endpoint} answered HTTP {status} for {client.repo}/{filename}")


def read_remote_header(client: HubClient, filename: str) -> list[TensorEntry]:
    """One shard's tensor table from two range requests."""
    prefix, total = client.get(filename, (0, 7), limit=8)
    length = header_length(prefix, total)
    header, _ = client.get(filename, (8, 8 + length - 1), limit=length)
    if len(header) != length:
        raise ModelFormatError(
            f"{client.repo}/{filename}: asked for {length} header bytes, got {len(header)}"
        )
    return parse_header(header, total - 8 - length)


def _json_file(client: HubClient, filename: str) -> bytes:
    """A small JSON file, refused when larger than MAX_JSON_BYTES (a hostile or wrong endpoint)."""
    raw, size = client.get(filename, limit=MAX_JSON_BYTES + 1)
    if len(raw) > MAX_JSON_BYTES or size > MAX_JSON_BYTES:
        raise ModelFormatError(
            f"{client.repo}/{filename} is {size} bytes, more than {MAX_JSON_BYTES}; not a model file"
        )
    return raw


def remote_shards(client: HubClient) -> list[str]:
    if client.exists("model.safetensors.index.json"):
        raw = _json_file(client, "model.safetensors.index.json")
        return shard_names(raw)
    return ["model.safetensors"] if client.exists("model.safetensors") else []


def fetch_model(repo: str, *, endpoint: str | None = None, token: str | None = None) -> ModelSpec:
    """ModelSpec of a hub repository: architecture from config.json, exact bytes from safetensors headers."""
    if not _REPO.fullmatch(repo):
        raise ConfigError(f"--hf needs a repository id like Org/Name, not {repo!r}")
    client = HubClient(
        endpoint or os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT,
        repo,
        token or os.environ.get("HF_TOKEN") or None,
    )
    raw = _json_file(client, "config.json")
    try:
        config = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise ModelFormatError(f"{repo}/config.json is not JSON ({exc})") from exc
    if not isinstance(config, dict):
        raise ModelFormatError(f"{repo}/config.json is not a JSON object")
    spec = spec_from_config(config, name=repo, source="hf")
    entries = [entry for shard in remote_shards(client) for entry in read_remote_header(client, shard)]
    return apply_headers(spec, entries) if entries else spec

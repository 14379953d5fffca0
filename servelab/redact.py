"""Secrets kept out of what servelab prints and stores: one marker, one test for a secret-looking name.

Secrets reach output in three shapes, each with one function here: a JSON tree a server sent back (sglang's
/get_server_info carries its own api_key), a command line (``--api-key K``), and free text that may echo a
key servelab knows (an engine's log tail, an HTTP error body).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

REDACTED = "<redacted>"
_SECRET_NAME = re.compile(r"api[_-]?key|secret|password|authorization|(?:hf|access|bearer)[_-]token", re.I)


def is_secret_name(name: object) -> bool:
    """True for a key or flag name that holds a credential (``api_key``, ``X-Api-Key``, ``hf_token`` …)."""
    return bool(_SECRET_NAME.search(str(name)))


def redact(value: Any) -> Any:
    """A copy of a JSON-like tree with the non-empty values under secret-looking keys replaced."""
    if isinstance(value, dict):
        return {k: (REDACTED if is_secret_name(k) and v else redact(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v) for v in value]
    return value


def redact_text(text: str, secrets: Iterable[str | None]) -> str:
    """``text`` with every occurrence of each known, non-empty secret replaced."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, REDACTED)
    return text


def redact_argv(argv: Iterable[str], secret_flags: Iterable[str]) -> list[str]:
    """The argv with the values of ``secret_flags`` (``--flag K`` and ``--flag=K``) replaced, for display."""
    out, flags = list(argv), frozenset(secret_flags)
    for i, word in enumerate(out):
        name, eq, _ = word.partition("=")
        if name in flags and eq:
            out[i] = f"{name}={REDACTED}"
        elif word in flags and i + 1 < len(out):
            out[i + 1] = REDACTED
    return out

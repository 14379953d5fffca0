"""Run ids that sort by creation time: ``20261130T184512.345-3f9a`` (UTC to the millisecond, random suffix)."""

from __future__ import annotations

import secrets
import time


def new_run_id(wall_ns: int | None = None) -> str:
    wall_ns = time.time_ns() if wall_ns is None else wall_ns
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(wall_ns // 1_000_000_000))
    millis = wall_ns // 1_000_000 % 1000
    return f"{stamp}.{millis:03d}-{secrets.token_hex(2)}"


def like_prefix(prefix: str) -> str:
    """A LIKE pattern matching ids that start with `prefix` literally (``\\`` is the escape)."""
    escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped + "%"

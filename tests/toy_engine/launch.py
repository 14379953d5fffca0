"""Starting ``toy-server``: it is never installed, so start() says so the way real engines do."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

from servelab.engines.process import EngineServer
from servelab.errors import EngineError

HEALTH_TIMEOUT_S = 10.0


def start(
    model: str, args: Sequence[str], *, host: str, port: int, log_path: Path | None, timeout_s: float
) -> EngineServer:
    if shutil.which("toy-server") is None:
        raise EngineError("ToyServe is not installed (no `toy-server` on PATH)")
    raise EngineError("ToyServe cannot really start")

"""Launching sglang (``python -m sglang.launch_server``) as a managed process, when it is installed.

Health: sglang's HTTP server answers GET /health with 200 once the model is loaded
(python/sglang/srt/entrypoints/http_server.py).
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path

from servelab.errors import EngineError

HEALTH_PATH = "/health"
HEALTH_TIMEOUT_S = 900.0  # weights load and CUDA graphs are captured before /health answers


def check_installed() -> None:
    """EngineError unless ``import sglang`` would work in this Python."""
    if importlib.util.find_spec("sglang") is None:
        raise EngineError(
            f'sglang is not installed in {sys.executable}; `pip install "sglang[all]"` on a GPU machine'
        )


def launch_argv(model: str | Path, *, host: str, port: int, args: Sequence[str] = ()) -> list[str]:
    """The sglang command line; ``args`` (engine flags) come last."""
    return [
        sys.executable,
        "-m",
        "sglang.launch_server",
        "--model-path",
        str(model),
        "--host",
        host,
        "--port",
        str(port),
        *args,
    ]

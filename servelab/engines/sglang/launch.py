"""Launching sglang (``python -m sglang.launch_server``) as a managed process, when it is installed.

Health: sglang's HTTP server answers GET /health with 200 once the model is loaded
(python/sglang/srt/entrypoints/http_server.py).
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path

from servelab.engines.flags import take_api_keys
from servelab.engines.process import EngineServer, start_program
from servelab.engines.sglang import HEALTH_PATH
from servelab.errors import ConfigError, EngineError

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


def start(
    model: str,
    args: Sequence[str],
    *,
    host: str,
    port: int,
    log_path: Path | None,
    timeout_s: float,
) -> EngineServer:
    """Start sglang on ``model`` (EngineError when it is not installed) and wait until it is healthy."""
    if take_api_keys(args)[1]:
        raise ConfigError(
            "sglang reads its API key from its command line only, which every user of this machine can read "
            "in `ps`; servelab does not put keys there: start sglang yourself and use `servelab verify --api-key`"
        )  # docs/reference/secrets.md §3
    check_installed()
    argv = launch_argv(model, host=host, port=port, args=args)
    return start_program(
        "sglang",
        argv,
        host=host,
        port=port,
        model=model,
        log_path=log_path,
        health_path=HEALTH_PATH,
        timeout_s=timeout_s,
    )

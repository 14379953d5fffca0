"""Launching vLLM (``vllm serve``) as a managed process, when it is installed.

Health: vLLM's OpenAI server answers GET /health with 200 once the engine is ready
(vllm/entrypoints/openai/api_server.py).
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

from servelab.engines.process import EngineServer, start_program
from servelab.engines.vllm import HEALTH_PATH
from servelab.errors import EngineError

HEALTH_TIMEOUT_S = 900.0  # weights load, torch.compile and CUDA graph capture come first


def check_installed() -> str:
    """The ``vllm`` program's path; EngineError when it is not on PATH."""
    program = shutil.which("vllm")
    if program is None:
        raise EngineError("vLLM is not installed (no `vllm` on PATH); `pip install vllm` on a GPU machine")
    return program


def launch_argv(
    model: str | Path, *, host: str, port: int, args: Sequence[str] = (), program: str = "vllm"
) -> list[str]:
    """The vLLM command line; ``args`` (engine flags) come last."""
    return [program, "serve", str(model), "--host", host, "--port", str(port), *args]


def start(
    model: str,
    args: Sequence[str],
    *,
    host: str,
    port: int,
    log_path: Path | None,
    timeout_s: float,
) -> EngineServer:
    """Start vllm on ``model`` (EngineError when it is not installed) and wait until it is healthy."""
    check_installed()
    argv = launch_argv(model, host=host, port=port, args=args)
    return start_program("vllm", argv, host=host, port=port, model=model, log_path=log_path,
                         health_path=HEALTH_PATH, timeout_s=timeout_s)  # fmt: skip

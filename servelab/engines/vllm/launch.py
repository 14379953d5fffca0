"""Launching vLLM (``vllm serve``) as a managed process, when it is installed.

Health: vLLM's OpenAI server answers GET /health with 200 once the engine is ready
(vllm/entrypoints/openai/api_server.py).
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

from servelab.errors import EngineError

HEALTH_PATH = "/health"
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

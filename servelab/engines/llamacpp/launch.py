"""Launching llama-server as a managed process: argv, port checks, health via GET /health, start errors.

``start_llama_server`` checks the model is a GGUF file and the port is free BEFORE starting, then waits
for /health to answer 200 (llama-server answers 503 while loading). An engine that dies at start becomes
EngineStartError with the telling log line in its message and the log tail attached.

An ``--api-key`` among the engine flags leaves the command line (which every user of the machine can read in
``ps``) and reaches llama-server as ``LLAMA_API_KEY`` in its environment, readable by its owner only; the
server reads that variable as it reads the flag, several keys comma-separated (docs/reference/secrets.md §1).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path

from servelab import paths
from servelab.engines.flags import take_api_keys
from servelab.engines.llamacpp import HEALTH_PATH
from servelab.engines.llamacpp.install import find_llama_server
from servelab.engines.process import EngineServer, check_port_free, free_port, start_server
from servelab.errors import ModelFormatError

GGUF_MAGIC = b"GGUF"
DEFAULT_HOST = "127.0.0.1"
HEALTH_TIMEOUT_S = 120.0
API_KEY_ENV = "LLAMA_API_KEY"  # common/arg.cpp: --api-key's set_env (docs/reference/secrets.md §1)


def check_gguf(model: Path) -> None:
    """ModelFormatError unless ``model`` is a readable file starting with the GGUF magic."""
    try:
        with open(model, "rb") as f:
            magic = f.read(4)
    except OSError as exc:
        raise ModelFormatError(f"cannot read model {model}: {exc.strerror or exc}") from exc
    if magic != GGUF_MAGIC:
        raise ModelFormatError(f"{model} is not a GGUF file (no GGUF magic); llama.cpp needs a .gguf model")


def server_argv(binary: Path, model: Path, *, host: str, port: int, args: Sequence[str] = ()) -> list[str]:
    """The llama-server command line; ``args`` (engine flags) come last and may override defaults."""
    return [str(binary), "-m", str(model), "--host", host, "--port", str(port), *args]


def server_env(binary: Path) -> dict[str, str]:
    """The environment with the binary's folder on LD_LIBRARY_PATH (its shared libraries live beside it)."""
    env = dict(os.environ)
    folder = str(Path(binary).resolve().parent)
    env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (folder, env.get("LD_LIBRARY_PATH", "")) if p)
    return env


LlamaServer = EngineServer  # the handle tests and callers use


def start_llama_server(
    model: Path | str,
    args: Sequence[str] = (),
    *,
    binary: Path | None = None,
    host: str = DEFAULT_HOST,
    port: int | None = None,
    log_path: Path | None = None,
    timeout_s: float = HEALTH_TIMEOUT_S,
) -> LlamaServer:
    """Start llama-server on ``model`` and wait until /health is OK. Raises before starting on bad input."""
    model = Path(model)
    check_gguf(model)
    binary = binary or find_llama_server().path
    port = port or free_port(host)
    check_port_free(host, port)
    log_path = (
        log_path or paths.data_dir() / "logs" / f"llama-server-{time.strftime('%Y%m%d-%H%M%S')}-{port}.log"
    )
    args, keys = take_api_keys(args)
    env = server_env(binary)
    if keys:
        env[API_KEY_ENV] = ",".join(keys)
    argv = server_argv(binary, model, host=host, port=port, args=args)
    return start_server(
        argv,
        host=host,
        port=port,
        model=model,
        log_path=log_path,
        health_path=HEALTH_PATH,
        timeout_s=timeout_s,
        env=env,
        name="llama-server",
        api_key=keys[-1] if keys else None,
    )


def start(
    model: str,
    args: Sequence[str],
    *,
    host: str,
    port: int,
    log_path: Path | None,
    timeout_s: float,
) -> EngineServer:
    """The launcher contract (servelab/engines/base.py): llama-server from servelab's build or PATH."""
    return start_llama_server(model, args, host=host, port=port, log_path=log_path, timeout_s=timeout_s)

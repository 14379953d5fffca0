"""Launching llama-server as a managed process: argv, port checks, health via GET /health, start errors.

``start_llama_server`` checks the model is a GGUF file and the port is free BEFORE starting, then waits
for /health to answer 200 (llama-server answers 503 while loading). An engine that dies at start becomes
EngineStartError with the telling log line in its message and the log tail attached.
"""

from __future__ import annotations

import os
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from servelab import paths
from servelab.engines.llamacpp.install import find_llama_server
from servelab.engines.process import ManagedProcess
from servelab.errors import EngineError, ModelFormatError

GGUF_MAGIC = b"GGUF"
DEFAULT_HOST = "127.0.0.1"
HEALTH_TIMEOUT_S = 120.0
HEALTH_REQUEST_TIMEOUT_S = 2.0


def check_gguf(model: Path) -> None:
    """ModelFormatError unless ``model`` is a readable file starting with the GGUF magic."""
    try:
        with open(model, "rb") as f:
            magic = f.read(4)
    except OSError as exc:
        raise ModelFormatError(f"cannot read model {model}: {exc.strerror or exc}") from exc
    if magic != GGUF_MAGIC:
        raise ModelFormatError(f"{model} is not a GGUF file (no GGUF magic); llama.cpp needs a .gguf model")


def free_port(host: str = DEFAULT_HOST) -> int:
    """A TCP port nothing listens on right now (the OS picks it)."""
    with socket.socket(_family(host), socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def check_port_free(host: str, port: int) -> None:
    """EngineError when ``host:port`` cannot be bound (something already listens there)."""
    with socket.socket(_family(host), socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as llama-server's HTTP library does
        try:
            s.bind((host, port))
        except OSError as exc:
            raise EngineError(f"port {port} on {host} is already in use; choose another with --port") from exc


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def server_argv(binary: Path, model: Path, *, host: str, port: int, args: Sequence[str] = ()) -> list[str]:
    """The llama-server command line; ``args`` (engine flags) come last and may override defaults."""
    return [str(binary), "-m", str(model), "--host", host, "--port", str(port), *args]


def server_env(binary: Path) -> dict[str, str]:
    """The environment with the binary's folder on LD_LIBRARY_PATH (its shared libraries live beside it)."""
    env = dict(os.environ)
    folder = str(Path(binary).resolve().parent)
    env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (folder, env.get("LD_LIBRARY_PATH", "")) if p)
    return env


def is_healthy(url: str) -> bool:
    """True when GET {url}/health answers 200."""
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=HEALTH_REQUEST_TIMEOUT_S) as resp:
            return resp.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


@dataclass
class LlamaServer:
    """A running llama-server. ``stop()`` ends it and everything it spawned."""

    process: ManagedProcess
    host: str
    port: int
    model: Path

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def log_path(self) -> Path:
        return self.process.log_path

    def stop(self) -> int | None:
        return self.process.stop()

    def __enter__(self) -> LlamaServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


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
    log_path = log_path or paths.data_dir() / "logs" / f"llama-server-{time.strftime('%Y%m%d-%H%M%S')}-{port}.log"
    argv = server_argv(binary, model, host=host, port=port, args=args)
    process = ManagedProcess(argv, log_path, env=server_env(binary), name="llama-server").start()
    server = LlamaServer(process, host, port, model)
    process.wait_healthy(lambda: is_healthy(server.url), timeout_s)
    return server

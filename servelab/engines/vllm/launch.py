"""Launching vLLM (``vllm serve``) as a managed process: the managed CPU venv's, or a GPU machine's own.

What the launch sets (docs/reference/vllm-cpu.md §3):
- ``VLLM_CPU_KVCACHE_SPACE`` (GiB): without it the CPU backend reserves 92% of the NUMA node and start-up fails;
  1 GiB unless the caller or the environment says otherwise (vLLM's GPU builds ignore it).
- offline and quiet: HF_HUB_OFFLINE=1 and TRANSFORMERS_OFFLINE=1 unless the environment says otherwise;
  VLLM_NO_USAGE_STATS=1 and DO_NOT_TRACK=1 always.
- caches inside servelab's cache dir: VLLM_CACHE_ROOT, TORCHINDUCTOR_CACHE_DIR, XDG_CACHE_HOME (kept between
  runs: the compile cache). The Hugging Face cache stays where it was, so cached hub models still load.
- TMPDIR: a folder of its own per run, ``<system temp>/servelab-vllm-<our pid>-<random>``, removed when the server
  stops (and, left by a servelab that was killed, at the next start). vLLM leaves a ``vllm_dist_<uuid>`` file
  there per start, and binds its zmq IPC sockets there, whose paths must stay under 107 characters
  (sockaddr_un): a folder under a deep cache dir failed with "ipc path ... is longer than 107 characters".

Health: vLLM's OpenAI server answers GET /health with 200 once the engine is ready. Its engine runs in a child
process (``EngineCore``) with a ``Worker`` below it; when that child dies the API server may stay up and never
answer (a Mamba-1 model left it blocked for 9 minutes), so the start, and ``VllmServer.failure()`` after it,
watch the engine core process too (``engine_core``).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from servelab import paths
from servelab.engines.flags import take_api_keys
from servelab.engines.process import (
    EngineServer,
    ManagedProcess,
    check_port_free,
    default_log_path,
    http_ok,
)
from servelab.engines.vllm import HEALTH_PATH
from servelab.engines.vllm.install import find_vllm
from servelab.errors import ConfigError, EngineStartError, ModelFormatError

HEALTH_TIMEOUT_S = 900.0  # weights load, torch.compile and CUDA graph capture come first
DEFAULT_HOST = "127.0.0.1"
API_KEY_ENV = "VLLM_API_KEY"  # vllm/envs.py, read by the API server when no --api-key is given
KV_CACHE_SPACE_GIB = 1  # VLLM_CPU_KVCACHE_SPACE when nothing else says
ENGINE_CORE = "EngineCore"  # the engine process's title (VLLM::EngineCore) and its log prefix
FORCED_ENV = {"VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}
DEFAULT_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
LOG_TAIL_LINES = 200  # a vLLM traceback runs through both processes; its root cause sits well above the end
DEATH_LOG_WAIT_S = 3.0
RUN_TMP_PREFIX = "servelab-vllm-"
IPC_PATH_MAX = 107  # sockaddr_un.sun_path; vLLM adds "/<uuid4>" (37 characters) to TMPDIR
IPC_NAME_CHARS = 37  # after the engine core dies, how long the API server gets to log why
# "(EngineCore pid=1) ERROR 12-01 11:40:07 [core.py:1510] ...": vLLM's logger prefix at level ERROR
ERROR_PREFIX = r"\(\S+ pid=\d+\) ERROR \d\d-\d\d [\d:]+ \[[^\]]+\] "
ERROR_LEVEL = re.compile(ERROR_PREFIX)
# an exception as a traceback ends it, bare or logged at ERROR: "ValueError: No available memory ..."
EXCEPTION_LINE = re.compile(rf"^(?:{ERROR_PREFIX})?[A-Za-z_][\w.]*(?:Error|Exception): ")


def launch_argv(
    model: str | Path, *, host: str, port: int, args: Sequence[str] = (), program: str | Path = "vllm"
) -> list[str]:
    """The vLLM command line; ``args`` (engine flags) come last."""
    return [str(program), "serve", str(model), "--host", host, "--port", str(port), *args]


def runtime_dir(cache_dir: Path | None = None) -> Path:
    """Where vLLM's caches live: cache_dir()/vllm/runtime."""
    return (cache_dir or paths.cache_dir()) / "vllm" / "runtime"


def launch_env(
    base: Mapping[str, str],
    run_tmp: Path,
    *,
    kv_cache_space_gib: float | None = None,
    cache_dir: Path | None = None,
) -> dict[str, str]:
    """The engine's environment: ``base`` plus the settings above (``kv_cache_space_gib`` wins over ``base``)."""
    root = runtime_dir(cache_dir)
    env = {**DEFAULT_ENV, **base, **FORCED_ENV}
    old_cache = base.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    env.setdefault("HF_HOME", str(Path(old_cache) / "huggingface"))
    env["VLLM_CACHE_ROOT"] = str(root / "vllm")
    env["TORCHINDUCTOR_CACHE_DIR"] = str(root / "torchinductor")
    env["XDG_CACHE_HOME"] = str(root / "xdg")
    env["TMPDIR"] = str(run_tmp)
    if kv_cache_space_gib is not None:
        env["VLLM_CPU_KVCACHE_SPACE"] = f"{kv_cache_space_gib:g}"
    env.setdefault("VLLM_CPU_KVCACHE_SPACE", str(KV_CACHE_SPACE_GIB))
    return env


def make_run_tmp(parent: Path | None = None) -> Path:
    """A fresh TMPDIR for one run, after removing those of servelab processes that no longer exist."""
    parent = Path(parent or tempfile.gettempdir())
    for stale in parent.glob(f"{RUN_TMP_PREFIX}*-*"):
        owner = stale.name.removeprefix(RUN_TMP_PREFIX).split("-")[0]
        if owner.isdigit() and not psutil.pid_exists(int(owner)):
            shutil.rmtree(stale, ignore_errors=True)
    run_tmp = Path(tempfile.mkdtemp(prefix=f"{RUN_TMP_PREFIX}{os.getpid()}-", dir=parent))
    if len(str(run_tmp)) + IPC_NAME_CHARS > IPC_PATH_MAX:
        shutil.rmtree(run_tmp, ignore_errors=True)
        raise ConfigError(
            f"the temp folder {parent} is too deep for vLLM's IPC sockets ({IPC_PATH_MAX} characters at most); "
            "set TMPDIR to a short path such as /tmp"
        )
    return run_tmp


def check_model(model: str) -> None:
    """ModelFormatError for a local path that is not a Hugging Face model folder (hub ids pass: offline cache)."""
    path = Path(model).expanduser()
    looks_local = path.exists() or model.startswith(("/", ".", "~")) or model.count("/") != 1
    if not looks_local:
        return
    if not path.is_dir() or not (path / "config.json").is_file():
        raise ModelFormatError(
            f"{model} is not a Hugging Face model folder (no config.json); vLLM serves a folder with "
            "config.json and safetensors (`servelab model make --format hf` makes one) or a cached hub id"
        )


def engine_core(api_pid: int) -> psutil.Process | None:
    """The engine core process below the API server, or None while there is none (yet, or any more)."""
    try:
        children = psutil.Process(api_pid).children(recursive=True)
    except psutil.Error:
        return None
    for child in children:
        with contextlib.suppress(psutil.Error):
            named = ENGINE_CORE in child.name() or any(ENGINE_CORE in part for part in child.cmdline())
            if named and child.status() != psutil.STATUS_ZOMBIE:
                return child
    return None


def error_line(log_tail: str) -> str:
    """The line of a vLLM log tail that says why it stopped: the first exception line (the root cause; later
    ones, EngineDeadError, are consequences), else the last ERROR line, else process.py's telling line."""
    lines = [line.strip() for line in log_tail.splitlines() if line.strip()]
    exceptions = [line for line in lines if EXCEPTION_LINE.match(line)]
    if exceptions:
        return exceptions[0]
    errors = [line for line in lines if ERROR_LEVEL.search(line)]
    return errors[-1] if errors else "its log names no error (was it killed from outside?)"


@dataclass(kw_only=True)
class VllmServer(EngineServer):
    """A running ``vllm serve``; ``failure()`` also notices an engine core that died under a living API server."""

    run_tmp: Path | None = None
    core_pid: int | None = field(default=None, init=False)

    def failure(self) -> str | None:
        exited = super().failure()
        if exited is not None:
            return exited
        core = engine_core(self.pid)
        if core is not None:
            self.core_pid = core.pid
            return None
        if self.core_pid is None:
            return None  # not started yet
        deadline = time.monotonic() + DEATH_LOG_WAIT_S
        while self.process.exit_code() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        state = "has exited" if self.process.exit_code() is not None else "is up but cannot answer"
        return (
            f"vLLM's engine core (pid {self.core_pid}) died; the API server (pid {self.pid}) {state}: "
            f"{error_line(self.process.log_tail())} (log: {self.log_path})"
        )

    def stop(self) -> int | None:
        code = super().stop()
        if self.run_tmp is not None:
            shutil.rmtree(self.run_tmp, ignore_errors=True)
        return code


def start_vllm(
    model: str | Path,
    args: Sequence[str] = (),
    *,
    program: Path | None = None,
    host: str = DEFAULT_HOST,
    port: int,
    log_path: Path | None = None,
    timeout_s: float = HEALTH_TIMEOUT_S,
    kv_cache_space_gib: float | None = None,
    cache_dir: Path | None = None,
) -> VllmServer:
    """Start ``vllm serve`` on ``model`` and wait until /health answers 200; EngineStartError when it dies,
    its engine core dies, or the bound passes. Bad input (model, port) is refused before anything starts.
    ``cache_dir`` (default: servelab's) holds the runtime caches."""
    check_model(str(model))
    args, key = _api_key(args)
    program = program or find_vllm().path
    check_port_free(host, port)
    log_path = log_path or default_log_path("vllm", port)
    run_tmp = make_run_tmp()
    env = launch_env(os.environ, run_tmp, kv_cache_space_gib=kv_cache_space_gib, cache_dir=cache_dir)
    if key is not None:
        env[API_KEY_ENV] = key
    argv = launch_argv(model, host=host, port=port, args=args, program=program)
    process = ManagedProcess(
        argv,
        log_path,
        env=env,
        name="vllm",
        telling=error_line,
        tail_lines=LOG_TAIL_LINES,
        secrets=[key] if key else (),
    )
    server = VllmServer(
        process=process, host=host, port=port, model=Path(model), api_key=key, run_tmp=run_tmp
    )
    try:
        process.start()
        process.wait_healthy(lambda: _healthy(server), timeout_s)
    except BaseException:
        server.stop()
        raise
    return server


def _api_key(args: Sequence[str]) -> tuple[list[str], str | None]:
    """The flags without ``--api-key``, and the key, which vLLM is handed as VLLM_API_KEY (one key: the
    variable holds one; docs/reference/secrets.md §2)."""
    kept, keys = take_api_keys(args)
    if len(set(keys)) > 1:
        raise ConfigError(
            "servelab hands vLLM its key in VLLM_API_KEY (never on the command line), which holds one key; "
            "give one --api-key"
        )
    return kept, keys[-1] if keys else None


def _healthy(server: VllmServer) -> bool:
    why = server.failure()
    if why is not None:
        raise EngineStartError(why, log_tail=server.process.log_tail())
    return http_ok(server.url + HEALTH_PATH)


def start(
    model: str,
    args: Sequence[str],
    *,
    host: str,
    port: int,
    log_path: Path | None,
    timeout_s: float,
) -> EngineServer:
    """The launcher contract (servelab/engines/base.py): vLLM from servelab's venv or a GPU machine's PATH."""
    return start_vllm(model, args, host=host, port=port, log_path=log_path, timeout_s=timeout_s)

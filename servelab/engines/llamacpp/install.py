"""Finding, registering and building llama-server.

Lookup order (``find_llama_server``): env SERVELAB_LLAMA_SERVER, then ``llama_server = "PATH"`` in
config_dir()/config.toml, then a build in cache_dir()/llama.cpp/<version>-<flags>/build/bin/llama-server.
The build (``install_llama_cpp``) downloads the pinned llama-cpp-python sdist, which vendors llama.cpp, and
compiles only the server target; the layout (dl/, src/, build/) is shared by every build key.
"""

from __future__ import annotations

import os
import re
import subprocess
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from servelab import paths
from servelab.errors import ConfigError, EngineError

PINNED_VERSION = "0.3.36"  # llama-cpp-python; vendors llama.cpp build b1-0c1e570
ENV_VAR = "SERVELAB_LLAMA_SERVER"
CONFIG_KEY = "llama_server"
BINARY = "llama-server"
VERSION_TIMEOUT_S = 20


@dataclass(frozen=True)
class LlamaServerBinary:
    path: Path
    version: str  # first line of ``--version``, e.g. "version: 0.5.0-dev (build 1, commit 0c1e570)"
    source: str  # "env", "config", "cache" or "build"


def config_file(config_dir: Path | None = None) -> Path:
    return (config_dir or paths.config_dir()) / "config.toml"


def check_llama_server(path: Path | str) -> str:
    """The binary's version line; EngineError unless ``path`` runs and says it is a llama.cpp build."""
    path = Path(path).expanduser()
    if not path.is_file() or not os.access(path, os.X_OK):
        raise EngineError(f"{path} is not an executable file; give the path of a llama-server binary")
    try:
        done = subprocess.run([str(path), "--version"], capture_output=True, timeout=VERSION_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EngineError(f"{path} does not run as llama-server ({exc}); give the path of a llama-server binary") from exc
    text = (done.stdout + done.stderr).decode("utf-8", errors="replace")
    match = re.search(r"^version: .*build.*$", text, re.MULTILINE)
    if done.returncode != 0 or match is None:
        raise EngineError(f"{path} is not llama-server: `--version` does not name a llama.cpp build; give the right binary")
    return match.group(0).strip()


def cached_binaries(cache_dir: Path | None = None) -> list[Path]:
    """Built llama-servers in the cache, the pinned version first, GPU builds before CPU ones."""
    root = (cache_dir or paths.cache_dir()) / "llama.cpp"
    found = [p for p in root.glob(f"*/build/bin/{BINARY}") if p.is_file()]
    return sorted(found, key=lambda p: (not p.parts[-4].startswith(PINNED_VERSION), p.parts[-4].endswith("-cpu"), p.parts[-4]))


def configured_binary(config_dir: Path | None = None) -> str | None:
    """``llama_server`` from config.toml, or None."""
    file = config_file(config_dir)
    if not file.is_file():
        return None
    try:
        value = tomllib.loads(file.read_text(encoding="utf-8")).get(CONFIG_KEY)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read {file}: {exc}; fix or delete it") from exc
    return str(value) if value else None


def find_llama_server(
    env: Mapping[str, str] | None = None, config_dir: Path | None = None, cache_dir: Path | None = None
) -> LlamaServerBinary:
    """Resolve llama-server: env, then config, then cache. EngineError saying how to install when missing."""
    env = os.environ if env is None else env
    if env.get(ENV_VAR):
        return LlamaServerBinary(Path(env[ENV_VAR]), check_llama_server(env[ENV_VAR]), "env")
    configured = configured_binary(config_dir)
    if configured:
        return LlamaServerBinary(Path(configured), check_llama_server(configured), "config")
    for path in cached_binaries(cache_dir):
        return LlamaServerBinary(path, check_llama_server(path), "cache")
    raise EngineError(
        "no llama-server found; run `servelab engine install llama.cpp` (builds it, ~5 min on 2 cores) "
        f"or `servelab engine install llama.cpp --llama-server PATH`, or set {ENV_VAR}"
    )


def register_llama_server(path: Path | str, config_dir: Path | None = None) -> LlamaServerBinary:
    """Check ``path`` and record it as ``llama_server`` in config.toml (other settings are kept)."""
    path = Path(path).expanduser().resolve()
    version = check_llama_server(path)
    file = config_file(config_dir)
    lines = file.read_text(encoding="utf-8").splitlines() if file.is_file() else []
    lines = [line for line in lines if not re.match(rf"\s*{CONFIG_KEY}\s*=", line)]
    lines.insert(0, f"{CONFIG_KEY} = {_toml_string(str(path))}")
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return LlamaServerBinary(path, version, "config")


def _toml_string(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'

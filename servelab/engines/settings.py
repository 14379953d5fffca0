"""Engine programs the user registered, kept in config_dir()/config.toml as ``key = "PATH"`` lines.

One reader and one writer for every engine's installer (``llama_server = …``, ``vllm = …``); other lines of the
file are kept as they are.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from servelab import paths
from servelab.errors import ConfigError


def config_file(config_dir: Path | None = None) -> Path:
    return (config_dir or paths.config_dir()) / "config.toml"


def read_setting(key: str, config_dir: Path | None = None) -> str | None:
    """``key`` from config.toml as a string, or None when the file or the key is absent."""
    file = config_file(config_dir)
    if not file.is_file():
        return None
    try:
        value = tomllib.loads(file.read_text(encoding="utf-8")).get(key)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read {file}: {exc}; fix or delete it") from exc
    return str(value) if value else None


def write_setting(key: str, value: str, config_dir: Path | None = None) -> None:
    """Set ``key = "value"`` in config.toml (first line), keeping every other setting."""
    file = config_file(config_dir)
    lines = file.read_text(encoding="utf-8").splitlines() if file.is_file() else []
    lines = [line for line in lines if not re.match(rf"\s*{re.escape(key)}\s*=", line)]
    lines.insert(0, f"{key} = {_toml_string(value)}")
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _toml_string(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'

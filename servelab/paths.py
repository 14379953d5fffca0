"""Where servelab keeps things: user config, data (the result store) and cache (engine builds).

Each directory honours an environment override so tests and CI can isolate them.
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

APP = "servelab"


def _dir(env: str, default: str) -> Path:
    value = os.environ.get(env)
    return Path(value) if value else Path(default)


def config_dir() -> Path:
    return _dir("SERVELAB_CONFIG_DIR", platformdirs.user_config_dir(APP))


def data_dir() -> Path:
    return _dir("SERVELAB_DATA_DIR", platformdirs.user_data_dir(APP))


def cache_dir() -> Path:
    return _dir("SERVELAB_CACHE_DIR", platformdirs.user_cache_dir(APP))


def default_db_path() -> Path:
    return data_dir() / "runs.db"

"""Fixtures for the tests that run a real vLLM (the CPU build `servelab engine install vllm` makes).

- ``vllm_program`` (session): the `vllm` servelab would use, resolved like ``find_vllm()`` from the environment
  as it was when this plugin was imported, before the autouse fixture isolates SERVELAB_*_DIR (the venv is
  cached in the real user cache between runs). Missing → the test fails with the install command.
"""

from __future__ import annotations

import os

import pytest

from servelab import paths
from servelab.engines.vllm.install import VllmProgram, find_vllm
from servelab.errors import EngineError

# Read at import, before `_isolate_user_dirs` points SERVELAB_*_DIR at a temporary folder.
REAL_ENV = dict(os.environ)
REAL_CONFIG_DIR = paths.config_dir()
REAL_CACHE_DIR = paths.cache_dir()


@pytest.fixture(scope="session")
def vllm_program() -> VllmProgram:
    try:
        return find_vllm(REAL_ENV, REAL_CONFIG_DIR, REAL_CACHE_DIR)
    except EngineError as exc:
        pytest.fail(f"these tests need a real vLLM: {exc}", pytrace=False)

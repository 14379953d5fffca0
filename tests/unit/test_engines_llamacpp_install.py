"""`engine install llama.cpp` stages its source and moves it into the cache only when complete (issue 26.2):
an extraction cut short leaves no tree a later install would take for finished. Exercised through the real
code path (_fetch_sources) on a small tarball shaped like the sdist, cut short the way a Ctrl-C or a truncated
download cuts it: after the first members are on disk."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from servelab.engines.llamacpp.install import _fetch_sources
from servelab.errors import EngineError

FILES = {
    "CMakeLists.txt": b"project(llama)\n",
    **{f"src/part{i}.c": bytes(4096) for i in range(40)},
    "tools/server/server.cpp": b"int main() {}\n",
}


def _sdist(path: Path) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in FILES.items():  # CMakeLists.txt first: the old "is it there?" check passed early
            info = tarfile.TarInfo(f"llama_cpp_python-0.3.36/vendor/llama.cpp/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(buffer.getvalue())
    return buffer.getvalue()


def test_an_interrupted_extraction_is_never_reused(tmp_path: Path) -> None:
    root = tmp_path / "llama.cpp" / "0.3.36-cpu"
    tarball = root / "dl" / "llama_cpp_python-0.3.36.tar.gz"
    whole = _sdist(tarball)
    tarball.write_bytes(whole[: len(whole) // 2])  # the extraction stops half-way
    with pytest.raises(EngineError, match="damaged"):
        _fetch_sources(root, lambda _: None)
    assert not (root / "src").exists()
    _sdist(tarball)  # the next install: the download complete again
    vendored = _fetch_sources(root, lambda _: None)
    assert all((vendored / name).read_bytes() == data for name, data in FILES.items())
    assert not (root / "src.partial").exists()


def test_a_staging_tree_left_by_ctrl_c_is_cleared_and_not_used(tmp_path: Path) -> None:
    root = tmp_path / "root"
    _sdist(root / "dl" / "sdist.tar.gz")
    leftover = root / "src.partial" / "vendor" / "llama.cpp"
    leftover.mkdir(parents=True)
    (leftover / "CMakeLists.txt").write_text("half")
    vendored = _fetch_sources(root, lambda _: None)
    assert (vendored / "CMakeLists.txt").read_bytes() == FILES["CMakeLists.txt"]
    assert (vendored / "tools/server/server.cpp").is_file() and not (root / "src.partial").exists()


def test_an_interrupted_build_is_never_taken_for_a_finished_one(tmp_path: Path) -> None:
    """cmake works in build.partial/, renamed to build/ only once its binary runs: a binary cmake left in the
    staging folder (a build cut short after the link) is not a cached build."""
    from servelab.engines.llamacpp.install import BINARY, build_key, cached_binaries

    staged = tmp_path / "llama.cpp" / build_key(None) / "build.partial" / "bin" / BINARY
    staged.parent.mkdir(parents=True)
    staged.write_text("#!/bin/sh\n")
    assert cached_binaries(tmp_path) == []
    finished = staged.parents[2] / "build" / "bin" / BINARY
    finished.parent.mkdir(parents=True)
    finished.write_text("#!/bin/sh\n")
    assert cached_binaries(tmp_path) == [finished]

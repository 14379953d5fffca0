"""`servelab engine install llama.cpp`: cache reuse, registering a binary, lookup order, refusals.

The 5-minute build itself is not repeated here: scripts/test runs `servelab engine install llama.cpp`
before the suite, and these tests check that a second install finds that build and that the build's
commands and cache layout are the ones the reference build used (docs/reference/llamacpp-local.md §1).
"""

from __future__ import annotations

import json
import platform
import re
import subprocess
import tarfile
from pathlib import Path

import pytest

from servelab.cli.app import main
from servelab.engines.llamacpp import install
from servelab.errors import ConfigError, DeviceError, EngineError


@pytest.fixture
def cache_with_build(llama_server_bin: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An isolated cache dir whose <version>-cpu/build/bin is the real build's folder."""
    key_dir = tmp_path / "cache" / "llama.cpp" / install.build_key(None) / "build"
    key_dir.mkdir(parents=True)
    (key_dir / "bin").symlink_to(llama_server_bin.parent)
    monkeypatch.setenv("SERVELAB_CACHE_DIR", str(tmp_path / "cache"))
    return key_dir / "bin" / "llama-server"


def test_install_reuses_the_cached_build(cache_with_build, capsys):
    assert main(["engine", "install", "llama.cpp", "--json"]) == 0
    captured = capsys.readouterr()
    result = json.loads(captured.out)
    assert result["path"] == str(cache_with_build)
    assert result["source"] == "cache"
    assert "commit" in result["version"]
    assert "already built" in captured.err


def test_registering_a_binary_writes_config_and_lookup_uses_it(llama_server_bin, capsys):
    assert main(["engine", "install", "llama.cpp", "--llama-server", str(llama_server_bin)]) == 0
    assert str(llama_server_bin.resolve()) in capsys.readouterr().out
    found = install.find_llama_server()
    assert (found.path, found.source) == (llama_server_bin.resolve(), "config")
    assert install.config_file().read_text().startswith('llama_server = "')


def test_env_wins_over_config_and_cache(llama_server_bin, cache_with_build, monkeypatch):
    monkeypatch.setenv(install.ENV_VAR, str(llama_server_bin))
    assert install.find_llama_server().source == "env"
    monkeypatch.delenv(install.ENV_VAR)
    assert install.find_llama_server().source == "cache"


def test_registering_something_else_is_refused_and_nothing_is_written(tmp_path, capsys):
    fake = tmp_path / "server"
    fake.write_text("#!/bin/sh\necho 'version: 1.0 of some other tool'\nexit 3\n")
    fake.chmod(0o755)
    assert main(["engine", "install", "llama.cpp", "--llama-server", str(fake)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and "is not llama-server" in captured.err
    assert not install.config_file().exists()


def test_missing_llama_server_says_how_to_install():
    with pytest.raises(EngineError, match=re.escape("run `servelab engine install llama.cpp`")):
        install.find_llama_server(env={})


def test_unknown_engine_is_a_usage_error(capsys):
    assert main(["engine", "install", "tensorrt"]) == 2
    assert "servelab installs: llama.cpp" in capsys.readouterr().err


def test_build_commands_match_the_reference_build(llama_server_bin):
    src, build = Path("/s"), Path("/b")
    argv = install.cmake_configure_argv(src, build, None)
    assert argv[:5] == ["cmake", "-S", "/s", "-B", "/b"]
    assert "-DLLAMA_CURL=OFF" in argv and "-DGGML_NATIVE=ON" in argv and not any("CUDA" in a for a in argv)
    cuda = install.cmake_configure_argv(src, build, "89")
    assert cuda[-2:] == ["-DGGML_CUDA=ON", "-DCMAKE_CUDA_ARCHITECTURES=89"]
    assert install.cmake_build_argv(build, 2)[-2:] == ["--target", "llama-server"]
    x86 = platform.machine().lower() in ("x86_64", "amd64")
    assert install.build_key("89") == f"{install.PINNED_VERSION}-cuda-sm89" + ("-noamx" if x86 else "")
    # AMX left out on x86 (a host that does not grant the tile state kills q8_0 models with SIGILL)
    assert (f"-DCMAKE_CXX_FLAGS={install.NO_AMX}" in argv) == x86
    cache = llama_server_bin.parents[2]  # <key>/build/bin/llama-server, the layout the cache reuses
    if cache.name.startswith(install.PINNED_VERSION):
        assert (cache / "src" / "vendor" / "llama.cpp" / "CMakeLists.txt").is_file()


def test_cuda_architecture_from_nvidia_smi_output():
    assert install.cuda_architecture(lambda argv: "8.9\n8.9\n") == "89"

    def no_gpu(argv):
        raise subprocess.CalledProcessError(9, argv)

    with pytest.raises(DeviceError, match="build without --cuda"):
        install.cuda_architecture(no_gpu)


def test_sdist_is_extracted_without_its_top_folder(tmp_path):
    top = tmp_path / "llama_cpp_python-0.3.36" / "vendor" / "llama.cpp"
    top.mkdir(parents=True)
    (top / "CMakeLists.txt").write_text("project(x)\n")
    tarball = tmp_path / "sdist.tar.gz"
    with tarfile.open(tarball, "w:gz") as tar:
        tar.add(tmp_path / "llama_cpp_python-0.3.36", arcname="llama_cpp_python-0.3.36")
    install._extract_stripped(tarball, tmp_path / "src")
    assert (tmp_path / "src" / "vendor" / "llama.cpp" / "CMakeLists.txt").read_text() == "project(x)\n"


def test_registering_keeps_other_settings_and_a_broken_config_is_named(llama_server_bin):
    file = install.config_file()
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text('llama_server = "/old/path"\ntheme = "dark"\n')
    install.register_llama_server(llama_server_bin)
    text = file.read_text()
    assert "/old/path" not in text and 'theme = "dark"' in text
    assert install.configured_binary() == str(llama_server_bin.resolve())
    file.write_text("llama_server = [unclosed\n")
    with pytest.raises(ConfigError, match=f"cannot read {re.escape(str(file))}"):
        install.find_llama_server(env={})

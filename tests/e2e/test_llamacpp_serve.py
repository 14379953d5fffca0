"""`servelab serve` as a user runs it: a real subprocess, a real llama-server, stopped by a signal."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from servelab.cli.app import main
from servelab.engines.process import free_port
from servelab.engines.sglang import launch as sglang_launch
from servelab.engines.vllm import launch as vllm_launch

READY = "press Ctrl-C to stop"


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _start_serve(
    tmp_path: Path, bin_path: Path, model: Path, *engine_args: str
) -> tuple[subprocess.Popen, Path, Path]:
    out, err = tmp_path / "serve.out", tmp_path / "serve.err"
    argv = [
        sys.executable,
        "-m",
        "servelab.cli.app",
        "serve",
        "llama.cpp",
        str(model),
        "--port",
        str(free_port()),
        "--log",
        str(tmp_path / "engine.log"),
        "--json",
        "--",
        "-t",
        "1",
        *engine_args,
    ]
    env = {**os.environ, "SERVELAB_LLAMA_SERVER": str(bin_path)}
    with open(out, "wb") as o, open(err, "wb") as e:
        proc = subprocess.Popen(argv, stdout=o, stderr=e, env=env)
    deadline = time.monotonic() + 60
    while READY not in err.read_text() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert READY in err.read_text(), err.read_text()
    return proc, out, err


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_serve_prints_effective_config_and_stops_the_engine_on_signal(
    sig, llama_server_bin, model_files, tmp_path
):
    proc, out, err = _start_serve(tmp_path, llama_server_bin, model_files["hybrid"], "-c", "2048", "-np", "2")
    report = json.loads(out.read_text())
    engine_pid = report["pid"]
    assert psutil.Process(engine_pid).is_running()
    assert report["effective"]["context_per_slot"] == 1024
    assert report["effective"]["slots"] == 2
    assert any("-np 2" in line for line in report["mismatches"])
    proc.send_signal(sig)
    assert proc.wait(timeout=30) == 0
    assert _gone(engine_pid)
    assert "stopping llama.cpp" in err.read_text()


def test_serve_with_an_api_key_reads_its_engine_and_never_prints_the_key(
    llama_server_bin, model_files, tmp_path
):
    proc, out, err = _start_serve(
        tmp_path, llama_server_bin, model_files["dense"], "-c", "1024", "--api-key", "sk-SERVE-SECRET"
    )
    report = json.loads(out.read_text())
    engine_argv = psutil.Process(report["pid"]).cmdline()  # what `ps` shows every user of the machine
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=30) == 0
    # the key went to llama-server as LLAMA_API_KEY (docs/reference/secrets.md §1): it enforces it, and servelab
    # read its settings with that key
    assert report["effective"]["context_per_slot"] == 1024
    assert "--api-key" not in report["command"] and "--api-key" not in engine_argv
    assert "sk-SERVE-SECRET" not in out.read_text() + err.read_text()


def test_engine_dies_with_serve_even_when_serve_is_killed(llama_server_bin, model_files, tmp_path):
    proc, out, _ = _start_serve(tmp_path, llama_server_bin, model_files["dense"], "-c", "512")
    engine_pid = json.loads(out.read_text())["pid"]
    proc.kill()  # no cleanup code runs in serve: the kernel's parent-death signal must end the engine
    proc.wait(timeout=10)
    deadline = time.monotonic() + 10
    while not _gone(engine_pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _gone(engine_pid)


def test_serve_refuses_a_file_that_is_not_gguf(tmp_path, capsys):
    bad = tmp_path / "model.gguf"
    bad.write_text("not a model")
    assert main(["serve", "llama.cpp", str(bad)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert (
        captured.err.strip().splitlines()[-1]
        == f"servelab: error: {bad} is not a GGUF file (no GGUF magic); llama.cpp needs a .gguf model"
    )


def test_serve_engine_death_at_start_is_one_line(
    llama_server_bin, model_files, tmp_path, capsys, monkeypatch
):
    monkeypatch.setenv("SERVELAB_LLAMA_SERVER", str(llama_server_bin))
    truncated = tmp_path / "t.gguf"
    truncated.write_bytes(model_files["dense"].read_bytes()[:40_000])
    assert main(["serve", "llama.cpp", str(truncated), "--port", str(free_port()), "--", "-t", "1"]) == 1
    error_lines = [
        line for line in capsys.readouterr().err.splitlines() if line.startswith("servelab: error:")
    ]
    assert len(error_lines) == 1
    assert "exited with code" in error_lines[0] and "error loading model" in error_lines[0]
    assert [p for p in psutil.Process().children(recursive=True) if "llama-server" in p.name()] == []


def test_serve_refuses_a_port_in_use(llama_server, llama_server_bin, model_files, capsys, monkeypatch):
    monkeypatch.setenv("SERVELAB_LLAMA_SERVER", str(llama_server_bin))
    running = llama_server(model_files["dense"], "-c", "512")
    assert main(["serve", "llama.cpp", str(model_files["dense"]), "--port", str(running.port)]) == 1
    assert f"port {running.port} on 127.0.0.1 is already in use" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("option", "says"),
    [
        (
            ["--port", "0"],
            "--port must be a whole number from 1 to 65,535 (omit it for the engine's usual port), got 0",
        ),
        (["--port", "70000"], "--port must be a whole number from 1 to 65,535"),
        (["--timeout", "-5"], "--timeout must be a number above 0 and at most 86,400 seconds, got -5.0"),
        (["--timeout", "nan"], "--timeout must be a number above 0 and at most 86,400 seconds, got nan"),
        (["--timeout", "inf"], "--timeout must be a number above 0 and at most 86,400 seconds, got inf"),
    ],
)
def test_serve_bad_port_or_timeout_is_a_usage_error_before_anything_starts(option, says, capsys):
    assert main(["serve", "llama.cpp", "m.gguf", *option]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith(f"servelab: error: {says}") and err.count("\n") == 1


def test_serve_unknown_engine_is_a_usage_error(capsys):
    assert main(["serve", "tgi", "m.gguf"]) == 2
    assert "choose one of: llama.cpp, sglang, vLLM" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("engine", "message"),
    [("sglang", "sglang is not installed"), ("vllm", "no vLLM found; run `servelab engine install vllm`")],
)
def test_serve_gpu_engines_say_when_they_are_not_installed(engine, message, capsys, monkeypatch):
    monkeypatch.setenv(
        "PATH", "/nonexistent"
    )  # no `vllm` program (nor vLLM venv in the isolated cache); no sglang
    assert main(["serve", engine, "some/model"]) == 1
    captured = capsys.readouterr()
    assert message in captured.err and captured.out == ""


def test_gpu_engine_command_lines():
    assert sglang_launch.launch_argv("org/m", host="127.0.0.1", port=30000, args=["--tp", "2"])[1:] == [
        "-m",
        "sglang.launch_server",
        "--model-path",
        "org/m",
        "--host",
        "127.0.0.1",
        "--port",
        "30000",
        "--tp",
        "2",
    ]
    assert vllm_launch.launch_argv(
        "org/m", host="127.0.0.1", port=8000, args=["--max-model-len", "4096"]
    ) == ["vllm", "serve", "org/m", "--host", "127.0.0.1", "--port", "8000", "--max-model-len", "4096"]

"""A real llama-server through its whole life: start, health, stop, and every way a start goes wrong."""

from __future__ import annotations

import os
import socket
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

from servelab.engines.llamacpp.install import check_llama_server
from servelab.engines.llamacpp.launch import start_llama_server
from servelab.engines.process import ManagedProcess
from servelab.errors import EngineError, EngineStartError, ModelFormatError


def _is_gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _group_members(pgid: int) -> list[psutil.Process]:
    """Live processes of a process group (zombies are dead, waiting for their new parent to reap them)."""
    members = []
    for proc in psutil.process_iter():
        try:
            if os.getpgid(proc.pid) == pgid and proc.status() != psutil.STATUS_ZOMBIE:
                members.append(proc)
        except (ProcessLookupError, psutil.NoSuchProcess):
            continue
    return members


def _our_llama_servers() -> list[psutil.Process]:
    return [p for p in psutil.Process().children(recursive=True) if "llama-server" in p.name()]


def test_launch_health_and_stop_leave_no_process(llama_server, model_files):
    server = llama_server(model_files["dense"], "-c", "512")
    with urllib.request.urlopen(f"{server.url}/health", timeout=5) as resp:
        assert resp.status == 200
    assert server.url == f"http://127.0.0.1:{server.port}"
    assert psutil.Process(server.pid).is_running()
    assert "llama-server" in psutil.Process(server.pid).name()
    server.stop()
    assert _is_gone(server.pid)
    assert _group_members(server.pid) == []
    assert server.log_path.read_text().strip(), "the engine log was written"


def test_hybrid_and_quantized_models_serve(llama_server, model_files):
    for kind in ("hybrid", "quantized"):
        server = llama_server(model_files[kind], "-c", "512", "-np", "1")
        body = b'{"prompt": "hello", "n_predict": 4, "ignore_eos": true}'
        request = urllib.request.Request(
            f"{server.url}/completion", data=body, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=30) as resp:
            assert b'"tokens_predicted":4' in resp.read().replace(b" ", b"")
        server.stop()


def test_port_in_use_is_refused_before_start(llama_server_bin, model_files, tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(EngineError, match=f"port {port} on 127.0.0.1 is already in use"):
            start_llama_server(
                model_files["dense"],
                ["-t", "1"],
                binary=llama_server_bin,
                port=port,
                log_path=tmp_path / "x.log",
            )
    assert not (tmp_path / "x.log").exists(), "nothing was started"
    assert _our_llama_servers() == []


def test_binary_that_is_not_llama_server_is_refused(tmp_path):
    fake = tmp_path / "llama-server"
    fake.write_text("#!/bin/sh\necho 'hello, I am something else'\n")
    fake.chmod(0o755)
    with pytest.raises(EngineError, match="is not llama-server"):
        check_llama_server(fake)
    with pytest.raises(EngineError, match="not an executable file"):
        check_llama_server(tmp_path / "missing")


def test_file_that_is_not_gguf_is_refused(llama_server_bin, tmp_path):
    not_gguf = tmp_path / "model.gguf"
    not_gguf.write_text("this is text, not a model\n")
    with pytest.raises(ModelFormatError, match="is not a GGUF file"):
        start_llama_server(not_gguf, binary=llama_server_bin, log_path=tmp_path / "x.log")
    assert _our_llama_servers() == []


def test_engine_dying_at_start_gives_one_line_with_log_tail(llama_server_bin, model_files, tmp_path):
    truncated = tmp_path / "truncated.gguf"
    truncated.write_bytes(Path(model_files["dense"]).read_bytes()[:50_000])
    with pytest.raises(EngineStartError) as info:
        start_llama_server(truncated, ["-t", "1"], binary=llama_server_bin, log_path=tmp_path / "die.log")
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("llama-server exited with code")
    assert "error loading model" in message  # the cause, not the final "exiting" line
    assert str(tmp_path / "die.log") in message
    assert "failed to load model" in info.value.log_tail
    assert _our_llama_servers() == []


def test_stop_ends_the_whole_process_group_even_a_child_that_ignores_sigterm(tmp_path):
    script = "trap '' TERM; sleep 60 & echo child $! ; wait"
    proc = ManagedProcess(["sh", "-c", script], tmp_path / "p.log", name="stubborn").start()
    deadline = time.monotonic() + 10
    while "child" not in (tmp_path / "p.log").read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    child_pid = int((tmp_path / "p.log").read_text().split()[1])
    assert proc.stop(grace_s=0.5) is not None
    # SIGKILL cannot be ignored, but its delivery is asynchronous: give the kernel a moment to finish the child
    deadline = time.monotonic() + 5
    while not (_is_gone(child_pid) and _group_members(proc.pid) == []) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert _is_gone(proc.pid) and _is_gone(child_pid)
    assert _group_members(proc.pid) == []


def test_wait_healthy_times_out_stops_the_process_and_names_the_log(tmp_path):
    proc = ManagedProcess(
        ["sh", "-c", "echo loading forever; sleep 60"], tmp_path / "slow.log", name="slow"
    ).start()
    with pytest.raises(
        EngineStartError, match=r"slow did not become healthy within 0.5 s: loading forever \(log: "
    ):
        proc.wait_healthy(lambda: False, timeout_s=0.5)
    assert _is_gone(proc.pid)


def test_interrupt_while_waiting_for_health_stops_the_process(tmp_path):
    proc = ManagedProcess(["sh", "-c", "sleep 60"], tmp_path / "i.log", name="loading").start()

    def interrupted() -> bool:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        proc.wait_healthy(interrupted, timeout_s=10)
    assert _is_gone(proc.pid)

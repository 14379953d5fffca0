"""Real vLLM servers of their own (not the shared one): a dead engine core is an error, not a hang; a start
that fails names its root cause; `servelab serve vllm` stops the API server, engine core and worker with no
orphans and no temp folder left behind."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from servelab.cli.app import main
from servelab.cli.serve import wait_until_stopped
from servelab.engines.process import free_port
from servelab.engines.vllm.launch import engine_core, start_vllm
from servelab.errors import EngineError, EngineStartError, ModelFormatError
from tests.integration.vllm.conftest import LIVE_ARGS, START_BOUND_S, start_test_vllm

SERVE_LINE_BOUND_S = START_BOUND_S + 60  # the start's own bound, plus verify's read-back


def _alive(pids: list[int]) -> list[int]:
    alive = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                alive.append(pid)
        except psutil.NoSuchProcess:
            continue
    return alive


def _run_tmps(owner: int) -> list[Path]:
    return list(Path(tempfile.gettempdir()).glob(f"servelab-vllm-{owner}-*"))


def _family(pid: int) -> list[int]:
    return [pid, *(p.pid for p in psutil.Process(pid).children(recursive=True))]


def test_a_dead_engine_core_is_an_error_and_stop_leaves_no_process(
    vllm_program, vllm_model_dir, vllm_cache, tmp_path, capsys
):
    server = start_test_vllm(vllm_program, vllm_model_dir, tmp_path, *LIVE_ARGS, cache_dir=vllm_cache)
    try:
        family = _family(server.pid)
        core = engine_core(server.pid)
        assert core is not None and "EngineCore" in core.name()
        assert server.failure() is None
        os.kill(core.pid, signal.SIGKILL)
        with pytest.raises(
            EngineError, match=rf"engine core \(pid {core.pid}\) died; the API server \(pid {server.pid}\)"
        ):
            wait_until_stopped(server)  # what `servelab serve` waits in: it returns, it does not hang
    finally:
        server.stop()
    assert _alive(family) == []
    assert server.run_tmp is not None and not server.run_tmp.exists()
    assert main(["logs", str(server.log_path), "--json"]) == 0
    found = {f["id"] for f in json.loads(capsys.readouterr().out)["findings"]}
    assert "vllm.engine.core_died" in found


def test_a_failed_start_names_its_root_cause(vllm_program, vllm_model_dir, vllm_cache, tmp_path, capsys):
    """VLLM_CPU_KVCACHE_SPACE=0 leaves the CPU build no KV cache: the engine core stops at start."""
    before = _run_tmps(os.getpid())  # the shared server's, when it runs
    with pytest.raises(EngineStartError) as caught:
        start_vllm(
            vllm_model_dir,
            LIVE_ARGS,
            program=vllm_program.path,
            port=free_port(),
            log_path=tmp_path / "vllm.log",
            timeout_s=START_BOUND_S,
            kv_cache_space_gib=0,
            cache_dir=vllm_cache,
        )
    message = str(caught.value)
    assert "ValueError: No available memory for the cache blocks." in message
    assert f"(log: {tmp_path / 'vllm.log'})" in message
    assert _run_tmps(os.getpid()) == before, "its TMPDIR is gone"
    assert main(["logs", str(tmp_path / "vllm.log"), "--json"]) == 0
    found = {f["id"] for f in json.loads(capsys.readouterr().out)["findings"]}
    assert {"vllm.cpu.kv_no_memory", "vllm.engine.failed_start"} <= found


def test_bad_model_is_refused_before_start(vllm_program, tmp_path):
    (tmp_path / "model.gguf").write_bytes(b"GGUF")
    for model in (tmp_path / "model.gguf", tmp_path / "missing"):
        with pytest.raises(ModelFormatError, match="is not a Hugging Face model folder"):
            start_vllm(model, program=vllm_program.path, port=free_port(), log_path=tmp_path / "x.log")
    assert not (tmp_path / "x.log").exists()


def test_serve_vllm_runs_until_sigterm_then_nothing_survives(
    vllm_program, vllm_model_dir, shared_vllm_runtime, tmp_path
):
    port = free_port()
    env = {**os.environ, "SERVELAB_VLLM": str(vllm_program.path), "VLLM_CPU_KVCACHE_SPACE": "1"}
    argv = [
        sys.executable,
        "-m",
        "servelab.cli.app",
        "serve",
        "vllm",
        str(vllm_model_dir),
        "--port",
        str(port),
        "--log",
        str(tmp_path / "serve.log"),
        "--timeout",
        str(START_BOUND_S),
        "--",
        *LIVE_ARGS,
    ]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) as proc:
        try:
            first = _read_line(proc, SERVE_LINE_BOUND_S)
            assert first.startswith(f"vLLM serving at http://127.0.0.1:{port}"), first
            family = _family(proc.pid)
            assert len(family) >= 4, "servelab, the API server, its engine core and worker"
            api = psutil.Process(int(re.search(r"\(pid (\d+)", first).group(1)))  # type: ignore[union-attr]
            assert api in psutil.Process(proc.pid).children()  # beside it, the engine group's watchdog
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=60) == 0  # SIGTERM is the way to stop `servelab serve`
            assert f"stopping vLLM (pid {api.pid})" in proc.stderr.read()  # type: ignore[union-attr]
        finally:
            if proc.poll() is None:
                proc.kill()
    deadline = time.monotonic() + 15
    while _alive(family) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _alive(family) == []
    assert _run_tmps(proc.pid) == [], "the per-run TMPDIR is removed"


def _read_line(proc: subprocess.Popen, bound_s: float) -> str:
    import selectors

    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)  # type: ignore[arg-type]
        if not selector.select(timeout=bound_s):
            raise AssertionError(f"no line from servelab serve within {bound_s:g} s: {proc.stderr}")
    return proc.stdout.readline()  # type: ignore[union-attr]

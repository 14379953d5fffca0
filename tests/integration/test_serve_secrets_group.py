"""`serve` hands an engine its API key in the environment, never argv, and ends the whole process group it
started even when serve itself is SIGKILLed and the engine binary is a wrapper script that does not exec
(issue 26.3). Real processes: a shell wrapper (no exec) around a small Python HTTP server posing as
llama-server; argv checked as `ps` shows it, in /proc/<pid>/cmdline."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from servelab.engines.process import free_port

KEY = "sk-servelab-secret-26"
CLI = [sys.executable, "-c", "import sys; from servelab.cli.app import main; sys.exit(main())"]

FAKE_SERVER = """
import http.server, json, os, sys
args = sys.argv[1:]
with open(os.environ["FAKE_OUT"], "w") as out:
    json.dump({"pid": os.getpid(), "env_key": os.environ.get("LLAMA_API_KEY") or os.environ.get("VLLM_API_KEY")}, out)
port = int(args[args.index("--port") + 1])

class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b'{"status": "ok"}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass

http.server.HTTPServer(("127.0.0.1", port), Handler).serve_forever()
"""


ENGINES = {"llama.cpp": "SERVELAB_LLAMA_SERVER", "vllm": "SERVELAB_VLLM"}


@pytest.fixture(params=list(ENGINES))
def fake_engine(request, tmp_path: Path) -> tuple[str, Path, dict[str, str]]:
    """An engine program that is a shell script running Python without exec (llama-server's or vllm's
    --version answer), its model, and the env that points serve at it."""
    engine = request.param
    (tmp_path / "fake_server.py").write_text(FAKE_SERVER)
    wrapper = tmp_path / "engine"
    version = "version: 1 (abc) built with cc for x86_64 build" if engine == "llama.cpp" else "0.8.5"
    wrapper.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = "--version" ]; then echo "{version}"; exit 0; fi\n'
        f'"{sys.executable}" "{tmp_path / "fake_server.py"}" "$@"\n'
        "echo wrapper done\n"
    )
    wrapper.chmod(0o755)
    if engine == "llama.cpp":
        model = tmp_path / "m.gguf"
        model.write_bytes(b"GGUF" + bytes(64))
    else:
        model = tmp_path / "hf"
        model.mkdir()
        (model / "config.json").write_text("{}")
    env = {
        **os.environ,
        "PYTHONPATH": os.getcwd(),
        ENGINES[engine]: str(wrapper),
        "FAKE_OUT": str(tmp_path / "fake.json"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }
    return engine, model, env


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    except OSError:
        return []


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat").read_text() if Path(f"/proc/{pid}/stat").exists() else ""
    return ") Z " not in stat  # a zombie has ended


def _serve(fake: tuple[str, Path, dict[str, str]]) -> tuple[subprocess.Popen[str], dict]:
    engine, model, env = fake
    serve = subprocess.Popen(
        [
            *CLI,
            "serve",
            engine,
            str(model),
            "--json",
            "--timeout",
            "60",
            "--port",
            str(free_port()),
            "--",
            "--api-key",
            KEY,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    text = ""  # the effective report (indented JSON), once the engine is healthy
    try:
        while not text.startswith("{") or not text.rstrip().endswith("\n}"):
            line = serve.stdout.readline()
            assert line, serve.stderr.read()
            text += line
        return serve, json.loads(text)
    except BaseException:
        serve.send_signal(signal.SIGINT)  # serve stops its engine
        serve.wait(timeout=60)
        raise


def _group_members(pgid: int) -> list[int]:
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.getpgid(int(entry.name)) == pgid:
                    members.append(int(entry.name))
            except OSError:
                pass
    return members


def test_the_api_key_reaches_the_engine_in_its_environment_never_in_argv(tmp_path: Path, fake_engine) -> None:
    serve, report = _serve(fake_engine)
    fake = json.loads((tmp_path / "fake.json").read_text())
    try:
        assert fake["env_key"] == KEY
        members = _group_members(report["pid"])
        assert fake["pid"] in members and len(members) >= 2
        for pid in members:  # the engine's group (serve's own argv is what the user typed)
            assert KEY not in " ".join(_cmdline(pid)), _cmdline(pid)
        assert KEY not in json.dumps(report)
    finally:
        serve.send_signal(signal.SIGINT)
        serve.wait(timeout=60)
    assert not _alive(fake["pid"])


def test_sigkill_of_serve_ends_the_engine_behind_a_wrapper_that_does_not_exec(
    tmp_path: Path, fake_engine
) -> None:
    serve, _ = _serve(fake_engine)
    engine_pid = json.loads((tmp_path / "fake.json").read_text())["pid"]
    serve.kill()
    serve.wait(timeout=30)
    deadline = (
        time.monotonic() + 60
    )  # the watchdog's grace is 10 s; the fake server ends at the first SIGTERM
    try:
        while _alive(engine_pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(engine_pid), "the engine outlived a SIGKILLed serve"
    finally:
        if _alive(engine_pid):
            os.kill(engine_pid, signal.SIGKILL)

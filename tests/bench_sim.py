"""`servelab sim` as a real process on loopback, for the bench tests: ``with sim_process("--itl-ms", "5") as url``.

Every ``sim_process`` is a fresh sim in its own process (its request count, faults and /sim/requests log start
at zero), answering real HTTP on 127.0.0.1. Starting Python and importing the CLI, aiohttp and uvloop costs
1-2 s on a loaded 2-core machine, about 60 times a suite, so the sims are forked from one launcher per test
process (`LAUNCHER`, started on first use) that has imported them once: each fork runs the CLI's own
``servelab sim --port 0 --json ARGS`` with the test's environment and working directory, in ~50 ms. The
launcher reaps its sims and stops them all when the test process goes (its stdin closes).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path

# The launcher: one JSON command a line on stdin, one JSON answer a line on stdout.
#   {"start": [args], "env": {...}, "cwd": "..."} -> {"pid": N, "line": first stdout line, "stderr": path}
#   {"stop": N}                                    -> {"stopped": N, "code": exit status}; stderr removed
LAUNCHER = r"""
import contextlib, io, json, os, signal, sys, tempfile
import aiohttp, servelab.cli.sim, servelab.sim.server  # what every sim imports, once
from servelab.cli.app import main
try:
    import uvloop
except ImportError:
    pass
with contextlib.redirect_stdout(io.StringIO()):
    main(["sim", "--help"])  # builds the app (every command's module) and parses once

def start(request):
    err = tempfile.NamedTemporaryFile(prefix="servelab-sim-", suffix=".err", delete=False)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read_end)
            os.setpgid(0, 0)
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.dup2(write_end, 1)
            os.dup2(err.fileno(), 2)
            os.environ.clear()
            os.environ.update(request["env"])
            os.chdir(request["cwd"])
            sys.stdin = open(0, closefd=False)
            sys.stdout = open(1, "w", closefd=False)
            sys.stderr = open(2, "w", closefd=False)
            code = main(["sim", "--port", "0", "--json", *request["start"]])
        except BaseException as exc:
            code = exc.code if isinstance(exc, SystemExit) and isinstance(exc.code, int) else 1
            if not isinstance(exc, SystemExit):
                import traceback
                traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code or 0)
    os.close(write_end)
    err.close()
    line = b""
    with os.fdopen(read_end, "rb") as out:
        line = out.readline()
    return {"pid": pid, "line": line.decode(errors="replace"), "stderr": err.name}

def stop(pid, err):
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    _, status = os.waitpid(pid, 0)
    os.unlink(err)
    return {"stopped": pid, "code": os.waitstatus_to_exitcode(status)}

running = {}  # pid -> its stderr file
try:
    for text in sys.stdin:
        request = json.loads(text)
        if "start" in request:
            answer = start(request)
            running[answer["pid"]] = answer["stderr"]
        else:
            answer = stop(request["stop"], running.pop(request["stop"]))
        print(json.dumps(answer), flush=True)
finally:
    for pid, err in running.items():
        stop(pid, err)
"""


class SimLauncher:
    """The launcher process of this test process; `start`/`stop` one sim at a time (a lock: threads share it)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc = subprocess.Popen(
            [sys.executable, "-c", LAUNCHER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )

    def ask(self, request: dict) -> dict:
        with self._lock:
            if self._proc.poll() is not None:
                raise RuntimeError(f"the sim launcher ended (exit {self._proc.returncode})")
            assert self._proc.stdin is not None and self._proc.stdout is not None
            self._proc.stdin.write(json.dumps(request) + "\n")
            self._proc.stdin.flush()
            line = self._proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the sim launcher ended (exit {self._proc.wait()})")
        return json.loads(line)

    def close(self) -> None:
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        self._proc.wait(timeout=30)


_launcher: list[SimLauncher] = []  # at most one per test process, made on first use


def launcher() -> SimLauncher:
    if not _launcher:
        _launcher.append(SimLauncher())
    return _launcher[0]


@contextlib.contextmanager
def sim_process(*args: str) -> Iterator[str]:
    """Start a fresh sim on a free port (its own process and core), yield its URL, stop it."""
    forker = launcher()
    started = forker.ask({"start": list(args), "env": dict(os.environ), "cwd": os.getcwd()})
    try:
        if not started["line"]:
            stderr = Path(started["stderr"]).read_text(errors="replace")
            raise RuntimeError(f"servelab sim did not start: {stderr}")
        yield json.loads(started["line"])["url"]
    finally:
        forker.ask({"stop": started["pid"]})  # the launcher removes its stderr file too


def sim_requests_seen(url: str) -> int:
    """How many generation requests the sim received (from its /metrics)."""
    with urllib.request.urlopen(url + "/metrics", timeout=5) as response:
        text = response.read().decode()
    return int(next(line.split()[1] for line in text.splitlines() if line.startswith("sim_requests_total")))

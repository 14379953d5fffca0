"""A managed engine child process: own process group, log file, health wait, clean stop, no orphans.

The child starts in a new session (its own process group), so ``stop()`` signals the engine and anything it
spawned: SIGTERM first, SIGKILL after a grace period. A running process is stopped at interpreter exit
(atexit), and on Linux the kernel kills it if this process dies without cleaning up (PR_SET_PDEATHSIG).
PR_SET_PDEATHSIG fires when the *thread* that started the child exits: start engines from a thread that
outlives them (the main thread), or pass ``die_with_parent=False``. PR_SET_PDEATHSIG reaches the child only,
not what it started (an engine behind a wrapper script that does not exec), so each engine also has a
watchdog: a small process in its own session holding the read end of a pipe whose write end only this process
has. When this process dies in any way, SIGKILL included, the pipe reads end-of-file and the watchdog ends the
engine's whole process group (SIGTERM, SIGKILL after the grace period); a clean ``stop()`` tells it to go.
``terminate_on_signals()`` turns SIGTERM/SIGHUP into KeyboardInterrupt so ``finally`` blocks run.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import errno
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from servelab import sync_http
from servelab.engines.flags import api_key_of
from servelab.errors import ConfigError, EngineError, EngineStartError, ServelabError
from servelab.redact import redact_text

STOP_GRACE_S = 10.0
POLL_INTERVAL_S = 0.1
TAIL_LINES = 20
PR_SET_PDEATHSIG = 1
HEALTH_REQUEST_TIMEOUT_S = 2.0
ERROR_WORDS = ("error", "failed", "fatal", "exception", "couldn't", "cannot", "invalid", "abort")


def _die_with_parent() -> None:  # runs in the child between fork and exec
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


# the watchdog (run with -I -S: no site, no user paths): argv[1] the engine's process group, argv[2] the grace
_WATCHDOG = """
import os, signal, sys, time
group, grace = int(sys.argv[1]), float(sys.argv[2])
if os.read(0, 1):
    sys.exit(0)
for sig in (signal.SIGTERM, signal.SIGKILL):
    try:
        os.killpg(group, sig)
    except OSError:
        sys.exit(0)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        try:
            os.killpg(group, 0)
        except OSError:
            sys.exit(0)
        time.sleep(0.1)
"""


def read_log_tail(log_path: Path, lines: int = TAIL_LINES) -> str:
    """The last ``lines`` lines of a log file ('' when it does not exist)."""
    try:
        with open(log_path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 64 * 1024))
            text = f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def telling_line(log_tail: str) -> str:
    """The line of a log tail that best says why an engine stopped: the first error-like line (the cause;
    later ones tend to be consequences), else the last line."""
    lines = [line.strip() for line in log_tail.splitlines() if line.strip()]
    errors = [line for line in lines if any(word in line.lower() for word in ERROR_WORDS)]
    return errors[0] if errors else (lines or ["(empty log)"])[-1]


class ManagedProcess:
    """One engine process. Use as a context manager or call ``stop()``; stopping twice is harmless."""

    def __init__(
        self,
        argv: Sequence[str],
        log_path: Path,
        *,
        env: Mapping[str, str] | None = None,
        name: str = "",
        die_with_parent: bool = True,
        telling: Callable[[str], str] = telling_line,
        tail_lines: int = TAIL_LINES,
        secrets: Sequence[str] = (),
    ) -> None:
        self.tail_lines = tail_lines  # how much of the log the error message and EngineStartError look at
        self.argv = list(argv)
        self.telling = telling  # the engine's own pick of the log line that says why it stopped
        self.die_with_parent = die_with_parent
        self.log_path = Path(log_path)
        self.env = dict(env) if env is not None else None
        self.name = name or Path(self.argv[0]).name
        self.secrets = tuple(secrets)  # keys handed over in env: masked in the log tail like argv's
        self._popen: subprocess.Popen[bytes] | None = None
        self._watchdog: subprocess.Popen[bytes] | None = None
        self._watchdog_pipe: int | None = None

    @property
    def pid(self) -> int:
        if self._popen is None:
            raise EngineError(f"{self.name} was never started")
        return self._popen.pid

    def start(self) -> ManagedProcess:
        preexec = _die_with_parent if self.die_with_parent and sys.platform.startswith("linux") else None
        try:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            log = open(self.log_path, "ab")  # noqa: SIM115 - closed below, once the child holds it
        except OSError as exc:
            raise ConfigError(f"cannot write the engine log {self.log_path}: {exc.strerror or exc}") from exc
        try:
            with log:
                self._popen = subprocess.Popen(
                    self.argv,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=self.env,
                    start_new_session=True,
                    preexec_fn=preexec,
                )
        except OSError as exc:
            raise EngineStartError(f"cannot run {self.argv[0]}: {exc.strerror or exc}") from exc
        atexit.register(self.stop)
        if self.die_with_parent:
            self._start_watchdog()
        return self

    def _start_watchdog(self) -> None:
        """The watchdog of this engine's group (see the module's docstring)."""
        read_end, write_end = os.pipe()  # not inherited: only this process holds the write end
        try:
            self._watchdog = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _WATCHDOG, str(self.pid), str(STOP_GRACE_S)],
                stdin=read_end,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError:
            os.close(write_end)
            self.stop()
            raise
        finally:
            os.close(read_end)
        self._watchdog_pipe = write_end

    def _dismiss_watchdog(self) -> None:
        """The engine was stopped here: the watchdog leaves without signalling anything."""
        if self._watchdog_pipe is not None:
            with contextlib.suppress(OSError):
                os.write(self._watchdog_pipe, b"x")
            os.close(self._watchdog_pipe)
            self._watchdog_pipe = None
        if self._watchdog is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._watchdog.wait(timeout=STOP_GRACE_S)
            self._watchdog = None

    def exit_code(self) -> int | None:
        """None while running; the exit status once it has exited."""
        return None if self._popen is None else self._popen.poll()

    def log_tail(self, lines: int | None = None) -> str:
        """The log's last lines, the API key of the command line masked (engines echo their arguments)."""
        tail = read_log_tail(self.log_path, lines or self.tail_lines)
        return redact_text(tail, [api_key_of(list(self.argv)), *self.secrets])

    def wait_healthy(self, is_healthy: Callable[[], bool], timeout_s: float) -> None:
        """Poll ``is_healthy`` until it is True; on death or timeout stop the process and raise EngineStartError.
        Interrupted (Ctrl-C) or failing in any other way, it stops the process too."""
        deadline = time.monotonic() + timeout_s
        try:
            while time.monotonic() < deadline:
                code = self.exit_code()
                if code is not None:
                    self._fail(f"{self.name} exited with code {code} at start")
                if is_healthy():
                    return
                time.sleep(POLL_INTERVAL_S)
        except BaseException:
            self.stop()
            raise
        self._fail(f"{self.name} did not become healthy within {timeout_s:g} s")

    def _fail(self, what: str) -> None:
        self.stop()
        tail = self.log_tail()
        raise EngineStartError(f"{what}: {self.telling(tail)} (log: {self.log_path})", log_tail=tail)

    def stop(self, grace_s: float = STOP_GRACE_S) -> int | None:
        """SIGTERM the process group, SIGKILL it after ``grace_s``; returns the exit status."""
        atexit.unregister(self.stop)
        if self._popen is None:
            return None
        if self._popen.poll() is None:
            self._signal_group(signal.SIGTERM)
            try:
                self._popen.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                self._signal_group(signal.SIGKILL)
                self._popen.wait()
            self._wait_group(grace_s)  # children (an engine core, its workers) finish their own shutdown
        self._signal_group(signal.SIGKILL)  # anything the engine left behind in its group
        self._dismiss_watchdog()
        return self._popen.returncode

    def _wait_group(self, grace_s: float) -> None:
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            try:
                os.killpg(self._popen.pid, 0)  # type: ignore[union-attr]
            except (ProcessLookupError, PermissionError):
                return
            time.sleep(POLL_INTERVAL_S)

    def _signal_group(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._popen.pid, sig)  # type: ignore[union-attr]

    def __enter__(self) -> ManagedProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@dataclass
class EngineServer:
    """A running engine that serves HTTP on host:port. ``stop()`` ends it and everything it spawned."""

    process: ManagedProcess
    host: str
    port: int
    model: Path
    api_key: str | None = None  # the key the engine was given in its environment, for servelab's own requests

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def log_path(self) -> Path:
        return self.process.log_path

    def failure(self) -> str | None:
        """None while the engine serves; otherwise why it does not (one line, with its log's telling line)."""
        code = self.process.exit_code()
        if code is None:
            return None
        why = self.process.telling(self.process.log_tail())
        return f"{self.process.name} exited with code {code}: {why} (log: {self.log_path})"

    def stop(self) -> int | None:
        return self.process.stop()

    def resident_peak_bytes(self) -> int | None:
        """The peak resident memory (VmHWM) of the engine and everything it spawned (its own process group: vLLM's
        API server, engine core and worker), summed: the memory a CPU engine used; None where /proc cannot say."""
        return group_resident_peak_bytes(self.pid)

    def __enter__(self) -> EngineServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def group_resident_peak_bytes(pid: int, proc: Path = Path("/proc")) -> int | None:
    """Sum of VmHWM over the processes of `pid`'s process group (Linux /proc); None where it cannot be read."""
    try:
        group = os.getpgid(pid)
    except OSError:
        return None
    total, seen = 0, False
    for entry in proc.iterdir() if proc.is_dir() else ():
        if not entry.name.isdigit():
            continue
        try:
            if os.getpgid(int(entry.name)) != group:
                continue
            status = (entry / "status").read_text(encoding="utf-8", errors="replace")
        except OSError:  # ended meanwhile, or not ours to read
            continue
        for line in status.splitlines():
            if line.startswith("VmHWM:"):
                total += int(line.split()[1]) * 1024  # kB
                seen = True
    return total if seen else None


def http_ok(url: str) -> bool:
    """True when GET ``url`` answers 200 (engines answer 503 while loading)."""
    try:
        answer = sync_http.request(url, timeout_s=HEALTH_REQUEST_TIMEOUT_S, limit=0)  # a redirect: not up
    except ServelabError:  # not up yet, or not a URL at all
        return False
    return answer.status == 200


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now (the OS picks it)."""
    with socket.socket(_family(host), socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def check_port_free(host: str, port: int) -> None:
    """EngineError when ``host:port`` cannot be bound (something already listens there)."""
    with socket.socket(_family(host), socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as engines' HTTP servers do
        try:
            s.bind((host, port))
        except OverflowError as exc:
            raise ConfigError(f"port {port} is outside 1-65535; choose another with --port") from exc
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise EngineError(
                    f"port {port} on {host} is already in use; choose another with --port"
                ) from exc
            raise ConfigError(
                f"cannot bind {host}:{port} ({exc.strerror or exc}); check --host (an address of this "
                "machine, e.g. 127.0.0.1 or 0.0.0.0)"
            ) from exc


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def start_server(
    argv: Sequence[str],
    *,
    host: str,
    port: int,
    model: Path,
    log_path: Path,
    health_path: str,
    timeout_s: float,
    env: Mapping[str, str] | None = None,
    name: str = "",
    api_key: str | None = None,
) -> EngineServer:
    """Start an engine whose port was checked free and wait until GET ``health_path`` answers 200;
    ``api_key``: the key ``env`` hands the engine (masked in its log tail, used by servelab's requests)."""
    process = ManagedProcess(argv, log_path, env=env, name=name, secrets=[api_key] if api_key else ()).start()
    server = EngineServer(process, host, port, model, api_key)
    process.wait_healthy(lambda: http_ok(server.url + health_path), timeout_s)
    return server


def default_log_path(name: str, port: int) -> Path:
    """Where an engine's log goes when none is asked: servelab's data dir, named by engine, time and port."""
    from servelab import paths

    return paths.data_dir() / "logs" / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}-{port}.log"


def start_program(
    name: str,
    argv: Sequence[str],
    *,
    host: str,
    port: int,
    model: str | Path,
    log_path: Path | None,
    health_path: str,
    timeout_s: float,
) -> EngineServer:
    """Start engine ``name`` on a port checked free, its log in ``log_path`` (default: servelab's data dir),
    and wait until GET ``health_path`` answers 200."""
    check_port_free(host, port)
    log = log_path or default_log_path(name, port)
    return start_server(
        argv,
        host=host,
        port=port,
        model=Path(model),
        log_path=log,
        health_path=health_path,
        timeout_s=timeout_s,
        name=name,
    )


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


@contextlib.contextmanager
def terminate_on_signals(
    signals: Sequence[signal.Signals] = (signal.SIGTERM, signal.SIGHUP),
) -> Iterator[None]:
    """While inside, SIGTERM/SIGHUP raise KeyboardInterrupt (so engines get stopped); handlers restored after."""
    previous = {sig: signal.signal(sig, _raise_interrupt) for sig in signals}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)

"""`servelab serve ENGINE MODEL [--port P] [--host H] [-- ENGINE ARGS…]`: run an engine in the foreground.

Starts the engine as a managed child process, waits for health, prints the effective configuration
(read back by servelab.verify and diffed against the command line), then waits for Ctrl-C or SIGTERM
and stops the engine. An engine that exits by itself ends the command with its telling log line.
"""

from __future__ import annotations

import shlex
import time
from pathlib import Path
from typing import Any

import typer

from servelab.cli.output import print_json, stderr_console, stdout_console
from servelab.engines import registry
from servelab.engines.base import Engine
from servelab.engines.process import EngineServer, free_port
from servelab.errors import ConfigError, EngineError, ServelabError
from servelab.ranges import count, number

POLL_S = 0.5
MAX_HEALTH_WAIT_S = 86_400.0  # a day: the largest models load in well under an hour


def start_engine(
    engine: Engine,
    model: str,
    args: list[str],
    *,
    host: str,
    port: int | None,
    log_path: Path | None,
    timeout_s: float | None,
) -> EngineServer:
    """Start ``engine`` on ``model``; the engine's own launcher builds its command line."""
    launcher = engine.launcher
    if launcher is None:
        raise ConfigError(
            f"servelab cannot start {engine.label}; start it yourself and use `servelab verify`"
        )
    return launcher.start(
        model,
        args,
        host=host,
        port=port or engine.default_port or free_port(host),
        log_path=log_path,
        timeout_s=timeout_s or launcher.HEALTH_TIMEOUT_S,
    )


WILDCARD_HOSTS = ("0.0.0.0", "::", "[::]", "")


def bound_address(engine: Engine, argv: list[str], host: str, port: int) -> str:
    """``host:port`` the engine really binds, read from its command line by its own reader (the last
    ``--host``/``--port`` wins, so flags after ``--`` override servelab's); a wildcard says so."""
    launch = engine.cmdline.parse(argv) if engine.cmdline is not None else None
    bound_host = (launch.host if launch is not None and launch.host is not None else host).strip()
    bound_port = launch.port if launch is not None and launch.port is not None else port
    shown = f"[{bound_host}]" if ":" in bound_host and not bound_host.startswith("[") else bound_host
    every = " (every interface)" if bound_host in WILDCARD_HOSTS else ""
    return f"{shown}:{bound_port}{every}"


def effective_report(server: EngineServer, engine: Engine) -> dict[str, object]:
    """What the running engine really got, diffed against its own command line."""
    from servelab.engines.flags import api_key_of, redact_argv
    from servelab.verify import from_command, verify

    argv = server.process.argv
    report: dict[str, object] = {
        "engine": engine.label,
        "url": server.url,
        "bound": bound_address(engine, list(argv), server.host, server.port),
        "pid": server.pid,
        "log_path": str(server.log_path),
        "command": shlex.join(redact_argv(argv)),
        "effective": {},
        "mismatches": [],
    }
    try:
        key = server.api_key or api_key_of(list(argv))
        result = verify(server.url, from_command(argv, engine=engine.name), api_key=key)
    except ServelabError as exc:  # the engine runs; say why its configuration could not be read back
        return {**report, "mismatches": [f"could not read the effective configuration: {exc}"]}
    return {
        **report,
        "effective": result.effective.summary(),
        "mismatches": [m.line for m in result.mismatches],
    }


def render(report: dict[str, Any]) -> None:
    out = stdout_console()
    out.print(
        f"{report['engine']} serving at {report['url']}, bound to {report['bound']} "
        f"(pid {report['pid']}, log {report['log_path']})"
    )
    out.print(f"command: {report['command']}")
    for key, value in report["effective"].items():
        out.print(f"  {key}: {value}")
    for line in report["mismatches"]:
        out.print(f"  note: {line}")


def wait_until_stopped(server: EngineServer) -> None:
    """Block until Ctrl-C / SIGTERM (KeyboardInterrupt) or the engine stops serving (EngineError)."""
    while (why := server.failure()) is None:
        time.sleep(POLL_S)
    raise EngineError(why)


def register(app: typer.Typer) -> None:
    """Add `servelab serve` to the app."""

    @app.command("serve")
    def serve(
        engine: str = typer.Argument(
            ..., help=f"One of: {', '.join(e.label for e in registry.launchable())}."
        ),
        model: str = typer.Argument(
            ..., help="Model: a .gguf file for llama.cpp; a path or hub id for sglang/vLLM."
        ),
        engine_args: list[str] | None = typer.Argument(None, help="Engine flags, after `--`."),
        port: int | None = typer.Option(None, help="Port (default: the engine's usual one)."),
        host: str = typer.Option("127.0.0.1", help="Address to bind; loopback unless you ask otherwise."),
        log: Path | None = typer.Option(None, help="Engine log file (default: in servelab's data dir)."),
        timeout: float | None = typer.Option(None, help="Seconds to wait for health."),
        as_json: bool = typer.Option(False, "--json", help="Print the effective configuration as JSON."),
    ) -> None:
        """Start an engine, wait for health, print what it really got; Ctrl-C or SIGTERM stops it."""
        from servelab.engines.process import terminate_on_signals

        chosen = registry.get_engine(engine, registry.launchable())
        if port is not None:
            count(port, "--port", 1, 65535, "(omit it for the engine's usual port)")
        if timeout is not None:
            number(timeout, "--timeout", 0, MAX_HEALTH_WAIT_S, "seconds", above=True)
        err = stderr_console()
        with terminate_on_signals():
            err.print(f"starting {chosen.label} on {model} …")
            server = start_engine(
                chosen, model, list(engine_args or []), host=host, port=port, log_path=log, timeout_s=timeout
            )
            try:
                report = effective_report(server, chosen)
                print_json(report) if as_json else render(report)
                err.print("press Ctrl-C to stop")
                wait_until_stopped(server)
            except KeyboardInterrupt:
                err.print(f"stopping {chosen.label} (pid {server.pid})")
            finally:
                server.stop()

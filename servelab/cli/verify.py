"""`servelab verify URL`: what the running server really got, against what was asked."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape
from rich.table import Table

from servelab.cli.output import print_json, stdout_console
from servelab.engines.detect import DetectedEngine, detect_engine
from servelab.ranges import number
from servelab.sync_http import DEFAULT_MAX_BYTES
from servelab.verify import (
    EXPECT_KEYS,
    Asked,
    EngineCommand,
    VerifyResult,
    from_compose,
    from_engine_command,
    from_plan,
    parse_expect,
    read_command,
    verify,
)

MAX_TIMEOUT_S = 3600.0  # per HTTP request


def register(app: typer.Typer) -> None:
    """Add this command to the app."""

    @app.command("verify")
    def verify_command(
        url: str = typer.Argument(..., help="Base URL of the running server, e.g. http://127.0.0.1:8080"),
        expect: list[str] = typer.Option(
            [],
            "--expect",
            help=f"key=value the server should have (repeatable); keys: {', '.join(EXPECT_KEYS)}.",
        ),
        cmd: str | None = typer.Option(
            None,
            "--cmd",
            help="The engine command line it was started with (llama-server …, vllm serve …, "
            "python -m sglang.launch_server …, ollama serve; VAR=value words, uv run …, sudo …, docker run … IMAGE "
            "allowed), "
            "or bare flags of the engine that answers.",
        ),
        compose: Path | None = typer.Option(
            None, "--compose", help="A docker-compose file whose service started it."
        ),
        service: str | None = typer.Option(
            None, "--service", help="The compose service (when there are several)."
        ),
        plan: Path | None = typer.Option(None, "--plan", help="A plan saved by `servelab plan`."),
        strict: bool = typer.Option(False, "--strict", help="Exit 1 when anything differs."),
        api_key: str | None = typer.Option(None, "--api-key", envvar="SERVELAB_API_KEY", help="Bearer key."),
        timeout_s: float = typer.Option(5.0, "--timeout", help="Seconds per HTTP request, the whole answer."),
        max_endpoint_bytes: int = typer.Option(
            DEFAULT_MAX_BYTES, "--max-endpoint-bytes", min=1, help="Longest endpoint body read."
        ),
        as_json: bool = typer.Option(False, "--json", help="Print JSON on stdout."),
    ) -> None:
        """Read the effective configuration from the server's own endpoints and diff it against what was asked."""
        # what needs no server is read first: a bad --cmd, --plan or --expect is refused before any request
        timeout_s = number(timeout_s, "--timeout", 0, MAX_TIMEOUT_S, "seconds", above=True)
        command = read_command(cmd) if cmd is not None else None
        planned = from_plan(plan) if plan is not None else None
        expected = parse_expect(expect)
        detected = detect_engine(url, api_key=api_key, timeout_s=timeout_s, max_bytes=max_endpoint_bytes)
        asked = gather_asked(detected, expected, command, compose, service, planned)
        result = verify(
            url, asked, api_key=api_key, timeout_s=timeout_s, engine=detected, max_bytes=max_endpoint_bytes
        )
        if as_json:
            print_json(result_json(result))
        else:
            render(result)
        if strict and result.mismatches:
            raise typer.Exit(1)


def gather_asked(
    detected: DetectedEngine,
    expected: Asked,
    command: EngineCommand | None,
    compose: Path | None,
    service: str | None,
    planned: Asked | None,
) -> Asked:
    """Plan, then compose, then --cmd, then --expect: a later source wins for the same key."""
    asked = Asked()
    if planned is not None:
        asked = asked.merged(planned)
    if compose is not None:
        asked = asked.merged(from_compose(compose, service, engine=detected.name))
    if command is not None:
        asked = asked.merged(from_engine_command(command, engine=detected.name))
    return asked.merged(expected)


def result_json(result: VerifyResult) -> dict[str, Any]:
    """The documented JSON shape: engine, effective, mismatches (key, asked, got, why, fix) and the rest."""
    effective = result.effective.reported()
    raw = result.effective.raw
    return {
        "url": result.url,
        "engine": result.engine,
        "version": result.version,
        "ok": result.ok,
        "effective": effective,
        "asked": result.asked,
        "mismatches": [{**dataclasses.asdict(m), "line": m.line} for m in result.mismatches],
        "unverified": result.unverified,
        "matched": result.matched,
        "notes": result.notes,
        "raw": raw,
    }


def render(result: VerifyResult) -> None:
    console = stdout_console()
    table = Table(
        title=" ".join(filter(None, (result.engine, result.version, "at", result.url))), title_justify="left"
    )
    table.add_column("setting")
    table.add_column("effective", justify="right")
    table.add_column("asked", justify="right")
    for key, value in result.effective.summary().items():
        if key not in ("engine", "version"):
            table.add_row(key, _cell(value), _cell(_asked_for(result, key)))
    console.print(table)
    for m in result.mismatches:
        console.print(
            f"[red]MISMATCH[/red] {escape(m.line)}"
            + (f"  [dim](asked by {escape(m.source)})[/dim]" if m.source else ""),
            markup=True,
        )
    for note in result.notes:
        console.print(f"[cyan]NOTE[/cyan] {escape(note)}", markup=True)
    for u in result.unverified:
        console.print(
            f"[yellow]UNVERIFIED[/yellow] {escape(f'{u.key}={_cell(u.asked)}: {u.reason}')}", markup=True
        )
    if result.asked and result.ok:
        console.print(
            f"[green]OK[/green] the server has what was asked ({escape(', '.join(result.matched) or 'nothing checkable')})",
            markup=True,
        )


_FIELD_TO_KEY = {"context_per_slot": "context", "kv_cache_dtype": "kv_dtype"}


def _asked_for(result: VerifyResult, field: str) -> Any:
    return result.asked.get(_FIELD_TO_KEY.get(field, field))


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items())
    return str(value)

"""`servelab logs`: known engine and NCCL log lines, each explained with its fix."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer
from rich.markup import escape

from servelab.cli.output import print_json, stdout_console, to_jsonable
from servelab.diagnose.logs import LogFinding, follow, scan_files
from servelab.diagnose.signatures import load_signature_file, load_signatures, signature_files
from servelab.errors import ConfigError

_STYLE = {"critical": "bold red", "warning": "yellow", "info": "cyan"}


def register(app: typer.Typer) -> None:
    """Add `servelab logs` to the app."""

    @app.command("logs")
    def logs(
        files: list[str] = typer.Argument(..., help="Log files to read; '-' reads standard input."),
        follow_: bool = typer.Option(
            False, "--follow", "-f", help="Keep reading one file as it grows (Ctrl-C stops)."
        ),
        engine: list[str] = typer.Option(
            [], "--engine", help=f"Only these signature sets (repeatable): {', '.join(signature_files())}."
        ),
        extra: list[Path] = typer.Option(
            [],
            "--signatures",
            help="Also use this signature YAML file (repeatable; format in docs/diagnostics.md).",
        ),
        as_json: bool = typer.Option(False, "--json", help='Print {"findings": [...]} as JSON.'),
    ) -> None:
        """Explain known warning lines in engine and NCCL logs, most severe first."""
        signatures = load_signatures(engine or None) + tuple(
            s for path in extra for s in load_signature_file(path)
        )
        if follow_:
            _follow(files, signatures, as_json)
            return
        findings = scan_files(files, signatures, stdin=sys.stdin)
        if as_json:
            print_json({"findings": [_public(f) for f in findings]})
        else:
            _render(findings)


def _follow(files: list[str], signatures: tuple, as_json: bool) -> None:
    if len(files) != 1 or files[0] == "-":
        raise ConfigError("--follow takes exactly one file path (not '-')")
    console = stdout_console()

    def show(finding: LogFinding) -> None:
        if as_json:
            sys.stdout.write(json.dumps(_public(finding)) + "\n")
            sys.stdout.flush()
        else:
            _render_one(console, finding)

    try:
        follow(files[0], signatures, show)
    except KeyboardInterrupt:
        return


def _public(finding: LogFinding) -> dict:
    return to_jsonable(finding)


def _render(findings: list[LogFinding]) -> None:
    console = stdout_console()
    if not findings:
        console.print("No known log lines found.")
        return
    for finding in findings:
        _render_one(console, finding)


def _render_one(console, finding: LogFinding) -> None:
    style = _STYLE[finding.severity]
    times = f" (x{finding.count})" if finding.count > 1 else ""
    console.print(
        f"[{style}]{finding.severity.upper()}[/] "
        + escape(f"{finding.id} [{finding.engine}] {finding.file}:{finding.line}{times}"),
        markup=True,
    )
    console.print(f"  line:    {finding.text}", markup=False)
    console.print(f"  meaning: {finding.meaning}", markup=False)
    console.print(f"  fix:     {finding.fix}", markup=False)

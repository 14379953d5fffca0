"""`servelab runs`, `servelab compare A B`, `servelab export RUN`: what the result store holds."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer
from rich import box
from rich.table import Column, Table
from rich.text import Text

from servelab.cli.output import print_json, stderr_console, stdout_console, to_jsonable
from servelab.errors import ConfigError
from servelab.inert import inert_line, inert_text
from servelab.paths import default_db_path
from servelab.ranges import count
from servelab.report.compare import Comparison, compare_runs
from servelab.report.export import run_csv, run_json, vllm_level_json
from servelab.results.level_key import Level
from servelab.store import RunInfo, Store

EXPORT_FORMATS = ("json", "csv")
DB_HELP = "The result store (default: the user data directory's runs.db)."


def register(app: typer.Typer) -> None:
    """Add `runs`, `compare` and `export` to the app."""

    @app.command("runs")
    def runs_command(
        db: Path | None = typer.Option(None, "--db", help=DB_HELP),
        as_json: bool = typer.Option(False, "--json", help="Print JSON on stdout."),
    ) -> None:
        """List the stored benchmark runs, oldest first."""
        if db is None and not default_db_path().exists():
            runs = []  # nothing benchmarked yet: listing must not create a store
        else:
            with Store.open(db, must_exist=True) as store:
                runs = store.list_runs()
        if as_json:
            print_json([run_info_json(r) for r in runs])
        else:
            render_runs(runs)

    @app.command("compare")
    def compare_command(
        run_a: str = typer.Argument(..., help="Run id (or a unique prefix): the baseline."),
        run_b: str = typer.Argument(..., help="Run id (or a unique prefix): compared against A."),
        db: Path | None = typer.Option(None, "--db", help=DB_HELP),
        as_json: bool = typer.Option(False, "--json", help="Print JSON on stdout."),
    ) -> None:
        """Two runs side by side per target and level, with Mann-Whitney U p-values on per-request samples."""
        with Store.open(db, must_exist=True) as store:
            comparison = compare_runs(store.load_run(run_a), store.load_run(run_b))
        for warning in comparison.warnings:
            stderr_console().print(f"warning: {warning}", markup=False)
        if as_json:
            print_json(comparison)
        else:
            render_comparison(comparison)

    @app.command("export")
    def export_command(
        run: str = typer.Argument(..., help="Run id (or a unique prefix)."),
        fmt: str = typer.Option(
            "json", "--format", help="json (vLLM-like, per target and level) or csv (per request)."
        ),
        output: Path | None = typer.Option(None, "-o", "--output", help="Write here instead of stdout."),
        level: str | None = typer.Option(
            None, "--level", help="Only this level (e.g. c=4), as one flat vLLM result."
        ),
        target: int = typer.Option(0, "--target", help="With --level: which target (0-based)."),
        db: Path | None = typer.Option(None, "--db", help=DB_HELP),
        as_json: bool = typer.Option(False, "--json", help="Same as --format json."),
    ) -> None:
        """Export a run as JSON close to vLLM's --save-result (schema: docs/results-schema.md) or CSV."""
        fmt = export_format(fmt, as_json, level)
        target = count(target, "--target", 0, 100_000)
        wanted = None if level is None else parse_level_option(level)
        with Store.open(db, must_exist=True) as store:
            stored = store.load_run(run)
        if fmt == "csv":
            write_text(run_csv(stored), output)
            return
        doc = run_json(stored) if wanted is None else vllm_level_json(stored, target, wanted)
        write_text(json.dumps(to_jsonable(doc), indent=2) + "\n", output)


def parse_level_option(text: str) -> Level:
    try:
        return Level.parse(text)
    except ValueError as exc:
        raise ConfigError(f"--level: {exc}") from None


def export_format(fmt: str, as_json: bool, level: str | None) -> str:
    if fmt not in EXPORT_FORMATS:
        raise ConfigError(f"unknown export format {fmt!r}; choose one of: {', '.join(EXPORT_FORMATS)}")
    if fmt == "csv" and (as_json or level is not None):
        raise ConfigError(f"--format csv contradicts {'--json' if as_json else '--level'}; choose one")
    return fmt


def write_text(body: str, output: Path | None) -> None:
    """Write `body` to `output`, or to stdout when there is none."""
    if output is None:
        typer.echo(inert_text(body) if sys.stdout.isatty() else body, nl=False)  # files keep exact bytes
        return
    try:
        output.write_text(body)
    except OSError as exc:
        raise ConfigError(f"cannot write {output}: {exc.strerror}") from exc
    stderr_console().print(f"wrote {output}", markup=False)


def run_info_json(info: RunInfo) -> dict:
    return {
        "id": info.id,
        "name": info.name,
        "created": info.created_iso,
        "status": info.status,
        "partial": info.partial,
        "engines": list(info.engines),
        "workload": info.workload,
        "requests": info.request_count,
        "errors": info.error_count,
    }


def render_runs(runs: list[RunInfo]) -> None:
    console = stdout_console()
    if not runs:
        console.print("no runs stored yet: `servelab bench URL` records one", markup=False)
        return
    headers = ("id (UTC time)", "name", "status", "engines", "workload", "ok/err")
    table = Table(
        *(Column(h, overflow="fold", no_wrap=h.startswith("id")) for h in headers), box=box.SIMPLE_HEAD
    )
    for r in runs:
        status = r.status + (", partial" if r.partial and r.status == "finished" else "")
        status = "interrupted, partial" if r.status == "interrupted" else status
        status = "running, partial" if r.status == "running" else status
        cells = (
            r.id,
            r.name or "",
            status,
            ", ".join(r.engines),
            r.workload or "",
            f"{r.request_count - r.error_count}/{r.error_count}",
        )
        table.add_row(*(Text(inert_line(cell)) for cell in cells))
    console.print(table)


def _number(value: float | None) -> str:
    return "—" if value is None else f"{value:.4g}"


def render_comparison(comparison: Comparison) -> None:
    several = (
        len({row.target_index for row in comparison.rows}) > 1
    )  # the target column only when it tells apart
    table = Table(
        title=f"A = {comparison.run_a}   B = {comparison.run_b}", box=box.SIMPLE_HEAD, collapse_padding=True
    )
    for header in (["target"] if several else []) + [
        "level",
        "metric",
        "A",
        "B",
        "change",
        "95% CI of B−A",
        "p",
    ]:
        table.add_column(header, no_wrap=header in ("level", "metric"), overflow="fold")
    for row in comparison.rows:
        change = "—" if row.change_pct is None else f"{row.change_pct:+.1f}%"
        p = "—" if row.p_value is None else f"{row.p_value:.3g}" + (" *" if row.significant else "")
        ci = "—" if row.diff_ci is None else f"{row.diff_ci[0]:+.3g}…{row.diff_ci[1]:+.3g}"
        cells = (row.level, row.metric, _number(row.a), _number(row.b), change, ci, p)
        table.add_row(
            *(Text(inert_line(cell)) for cell in ((str(row.target_index),) if several else ()) + cells)
        )
    stdout_console().print(table)
    stdout_console().print(
        "medians of per-request samples; CI: bootstrap of the median difference;\n* = p < 0.05 (Mann-Whitney U)",
        markup=False,
    )

"""`servelab report [RUN…]`: the bill as a self-contained HTML page, its Markdown twin, or in the terminal."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import typer

from servelab.cli.output import print_json, stderr_console, stdout_console
from servelab.errors import ConfigError, StoreError
from servelab.plan.io import load_plan, read_json_object
from servelab.report import FORMATS, assemble, render_report
from servelab.report.advice import AdviceDoc
from servelab.report.bound import power_bounds
from servelab.report.data import Bill, is_predicted, read_json_file
from servelab.report.page import build_page
from servelab.report.terminal import render_terminal
from servelab.report.verdict import verdicts
from servelab.store import Store, StoredRun
from servelab.userfiles import UserFile

MAX_SERVER_LOG_BYTES = 512 << 20  # a --server-log is read whole for its memory lines


def register(app: typer.Typer) -> None:
    """Add `report` to the app."""

    @app.command("report")
    def report_command(
        runs: list[str] = typer.Argument(None, help="Run ids or unique prefixes (default: the latest run)."),
        db: Path | None = typer.Option(
            None, "--db", help="The result store (default: the user data directory's)."
        ),
        plan: Path | None = typer.Option(
            None, "--plan", help="`servelab plan --json` output: ceilings and memory."
        ),
        doctor: Path | None = typer.Option(
            None, "--doctor", help="`servelab doctor [--burn] --json` output: findings, full-compute power."
        ),
        spec: Path | None = typer.Option(
            None, "--spec", help="`servelab spec --json` output: the spec verdict."
        ),
        server_logs: list[Path] = typer.Option(
            [],
            "--server-log",
            help="A target's server log, in target order (llama-server -lv 4): the memory it allocated.",
        ),
        output: Path | None = typer.Option(
            None, "-o", "--output", help="Write here (default bill.html / bill.md)."
        ),
        fmt: str | None = typer.Option(
            None, "--format", help="html or md (default: from -o's suffix, else html)."
        ),
        terminal: bool = typer.Option(
            False, "--terminal", help="Show the tables and small plots here instead."
        ),
        as_json: bool = typer.Option(
            False, "--json", help="Print what was written and the verdicts as JSON."
        ),
        predicted: str | None = typer.Option(
            None,
            "--predicted",
            help="A `servelab predict` run: the ladders overlay it and a table gives its error.",
        ),
        advice: Path | None = typer.Option(
            None, "--advice", help="`servelab advise --json` output: the front as a table and a plot."
        ),
    ) -> None:
        """Render the bill: every figure beside its ceiling, plots, diagnosis and a verdict per scenario."""
        fmt = choose_format(fmt, output)
        if terminal and as_json:
            raise ConfigError("--terminal and --json both claim standard output; choose one")
        plan_doc = None if plan is None else load_plan(plan, flag="--plan", required=(), bare_entry=True)
        optional = (plan_doc, _optional(doctor, "doctor"), _optional(spec, "spec"))
        advised = (
            None
            if advice is None
            else AdviceDoc.from_json(
                read_json_object(advice, "--advice", "expected the output of `servelab advise --json`"),
                "--advice",
            )
        )
        loaded = [] if advised is not None and not runs else load_runs(db, runs or [])
        predicted_id = None
        if predicted is not None:
            prediction = load_prediction(db, predicted)
            loaded, predicted_id = [r for r in loaded if r.id != prediction.id] + [prediction], prediction.id
        bill = assemble(
            loaded, *optional, server_logs=[read_log(p) for p in server_logs], predicted_run=predicted_id
        )
        if terminal:
            render_terminal(stdout_console(), bill, build_page(bill, with_plots=False, advised=advised))
            return
        path = output or Path(f"bill.{fmt}")
        text, extra_files = render_report(bill, fmt, plot_dir=f"{path.stem}_plots", advised=advised)
        write(path, text)
        for name, body in extra_files.items():
            write(path.parent / name, body)
        if as_json:
            print_json(report_json(bill, path, fmt))
        else:
            stderr_console().print(f"wrote {path}", markup=False)


def choose_format(fmt: str | None, output: Path | None) -> str:
    if fmt is None:
        return "md" if output is not None and output.suffix.lower() in (".md", ".markdown") else "html"
    if fmt not in FORMATS:
        raise ConfigError(f"unknown report format {fmt!r}; choose one of: {', '.join(FORMATS)}")
    return fmt


def _optional(path: Path | None, what: str) -> dict | None:
    return None if path is None else read_json_file(path, what)


def read_log(path: Path) -> tuple[str, str]:
    data = UserFile.named(path, "--server-log", "give an engine's log file").read_bytes(MAX_SERVER_LOG_BYTES)
    return str(path), data.decode("utf-8", errors="replace")


def load_runs(db: Path | None, run_ids: list[str]) -> list[StoredRun]:
    """The named runs, or the latest one when none is named."""
    with Store.open(db, must_exist=True) as store:
        if not run_ids:
            latest = store.list_runs()[-1:]
            if not latest:
                raise StoreError(f"no runs in {store.path}; record one with `servelab bench URL` first")
            run_ids = [latest[0].id]
        return [store.load_run(run_id) for run_id in run_ids]


def load_prediction(db: Path | None, run_id: str) -> StoredRun:
    """The `--predicted` run; ConfigError when it is a measured one."""
    with Store.open(db, must_exist=True) as store:
        run = store.load_run(run_id)
    if not is_predicted(run):
        raise ConfigError(
            f"--predicted {run_id}: run {run.id} was measured, not predicted; "
            "give a run stored by `servelab predict`"
        )
    return run


def write(path: Path, text: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot write the report to {path}: {exc.strerror}") from exc


def report_json(bill: Bill, path: Path, fmt: str) -> dict:
    return {
        "output": str(path),
        "format": fmt,
        "runs": list(bill.run_ids),
        "partial_runs": list(bill.partial_runs),
        "warnings": list(bill.warnings),
        "verdicts": [
            {"scenario": v.scenario, "choice": v.choice, "sentence": v.sentence} for v in verdicts(bill)
        ],
        "bound": [_bound_json(b) for b in power_bounds(bill)[1]],
    }


def _bound_json(bound) -> dict:
    """One engine's bound: the verdict's numbers, the samples and level its serving power is from, and the
    power and energy per output token of each level with samples."""
    levels = [{**asdict(lv), "joules_per_token": lv.joules_per_token} for lv in bound.levels]
    return {
        "engine": bound.label,
        **asdict(bound.analysis),
        "power_samples": bound.samples,
        "power_level": bound.power_level,
        "power_gpus": list(bound.gpus),
        "levels": levels,
    }

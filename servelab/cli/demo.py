"""`servelab demo [--workdir DIR] [--json]`: the whole chain on this machine, step by step."""

from __future__ import annotations

import tempfile
from pathlib import Path

import typer

from servelab.cli.output import print_json, stderr_console, stdout_console
from servelab.demo import DemoConfig, DemoResult, run_demo


def render(result: DemoResult) -> None:
    """A short summary on stdout; the narration went to stderr as it happened."""
    steps = {step.name: step.outcome for step in result.steps}
    out = stdout_console()
    for name in ("divided", "right"):
        got = steps[name]
        verdict = "; ".join(got["mismatches"]) or "as asked"
        out.print(
            f"{' '.join(got['args'])}: context per slot {got['context_per_slot']}, {verdict}", markup=False
        )
    out.print(f"benchmark runs: {', '.join(steps['bench']['run_ids']) or '(none)'} in {steps['bench']['db']}")
    out.print(f"report: {result.report_path or '(none)'}")


def register(app: typer.Typer) -> None:
    """Add `servelab demo` to the app."""

    @app.command("demo")
    def demo(
        workdir: Path | None = typer.Option(None, help="Where to keep the model, logs, runs and report."),
        threads: int = typer.Option(2, help="llama-server threads (-t)."),
        requests: int = typer.Option(8, help="Measured requests per concurrency level."),
        as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    ) -> None:
        """Build or find llama-server, make a hybrid model, plan it, catch a divided context, fix it, benchmark, report."""
        from servelab.engines.process import terminate_on_signals
        from servelab.ranges import count

        threads = count(threads, "--threads", 1, 1024, "threads")  # before anything is built or started
        requests = count(requests, "--requests", 1, 1_000_000, "per level")

        workdir = workdir or Path(tempfile.mkdtemp(prefix="servelab-demo-"))
        err = stderr_console()
        with terminate_on_signals():
            result = run_demo(
                DemoConfig(workdir=workdir, threads=threads, requests_per_level=requests),
                lambda line: err.print(line, markup=False),
            )
        print_json(result) if as_json else render(result)

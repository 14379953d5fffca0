"""`servelab demo [--engines llama.cpp,vllm] [--workdir DIR] [--json]`: the whole chain on this machine, step by step."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import typer

from servelab.cli.output import print_json, stderr_console, stdout_console
from servelab.demo import DemoConfig, DemoResult, parse_engines, run_demo


def _num(value: Any, digits: int = 1) -> str:
    return f"{value:,.{digits}f}" if isinstance(value, int | float) else "—"


def summary_lines(summary: dict[str, Any]) -> list[str]:
    """The two-engine summary: a line per engine and workload, then the faster engine per scenario."""
    lines = []
    for row in summary.get("engines", []):
        share = row.get("single_of_ceiling")
        of = f" ({share:.0%} of its plan's {_num(row['ceiling_tok_s'])})" if isinstance(share, float) else ""
        lines.append(
            f"{row['label']}: single user {_num(row['single_tok_s'])} tok/s{of}, best aggregate "
            f"{_num(row['best_aggregate_tok_s'])} tok/s @ {row['best_at'] or '—'}, at {row['top_level'] or '—'} "
            f"TTFT p99 {_num(row['ttft_p99_ms'], 0)} ms, TPOT p99 {_num(row['tpot_p99_ms'])} ms, "
            f"evicted/stalled {row['evictions']}"
        )
    lines += [f"faster for {v['scenario']}: {v['sentence']}" for v in summary.get("faster", [])]
    return lines


def render(result: DemoResult) -> None:
    """A short summary on stdout; the narration went to stderr as it happened."""
    steps = {step.name: step.outcome for step in result.steps}
    out = stdout_console()
    for name in ("divided", "right"):
        got = steps.get(name)
        if got:
            verdict = "; ".join(got["mismatches"]) or "as asked"
            out.print(
                f"{' '.join(got['args'])}: context per slot {got['context_per_slot']}, {verdict}",
                markup=False,
            )
    vllm = steps.get("vllm") or {}
    if "skipped" in vllm:
        out.print(f"vLLM skipped: {vllm['skipped']}", markup=False)
    for line in summary_lines(steps.get("summary") or {}):
        out.print(line, markup=False)
    advice = steps.get("advice") or {}
    if advice.get("available"):
        error = advice.get("median_abs_error")
        out.print(
            f"advice for the demo's goal: {advice.get('advised') or 'nothing meets the SLO'}"
            + (
                ""
                if error is None
                else f"; the calibration predicts the measured levels within {error:.0%} (median |error|)"
            )
            + f"; {advice['file']}",
            markup=False,
        )
    out.print(f"benchmark runs: {', '.join(steps['bench']['run_ids']) or '(none)'} in {steps['bench']['db']}")
    out.print(f"report: {result.report_path or '(none)'}")
    if "summary" in steps and "wall_s" in steps["summary"]:
        out.print(f"wall time: {steps['summary']['wall_s']} s")


def register(app: typer.Typer) -> None:
    """Add `servelab demo` to the app."""

    @app.command("demo")
    def demo(
        workdir: Path | None = typer.Option(None, help="Where to keep the models, logs, runs and report."),
        engines: str = typer.Option(
            "llama.cpp,vllm",
            help="Engines to run, comma-separated: llama.cpp, vllm (installed on first use).",
        ),
        threads: int = typer.Option(
            2, help="llama-server threads (-t), at most the CPUs the server is pinned to."
        ),
        requests: int = typer.Option(100, help="Measured requests per concurrency level (enough for a p99)."),
        as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    ) -> None:
        """Run llama.cpp (slots) and vLLM (continuous batching) on one self-made Llama: plan each for this CPU,
        catch a divided context, fix it, benchmark both under the same workloads, report them side by side."""
        from servelab.cli.live_view import LadderView
        from servelab.engines.process import terminate_on_signals
        from servelab.ranges import count

        threads = count(threads, "--threads", 1, 1024, "threads")  # before anything is built or started
        requests = count(requests, "--requests", 1, 1_000_000, "per level")
        chosen = parse_engines(engines)

        workdir = workdir or Path(tempfile.mkdtemp(prefix="servelab-demo-"))
        err = stderr_console()
        with terminate_on_signals():
            result = run_demo(
                DemoConfig(workdir=workdir, threads=threads, requests_per_level=requests, engines=chosen),
                lambda line: err.print(line, markup=False),
                lambda lag_limit_ms: LadderView(err, lag_limit_ms),
            )
        print_json(result) if as_json else render(result)

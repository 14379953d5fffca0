"""`servelab spec`: acceptance, the speedup theory predicts, the speedup measured, and a verdict."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from servelab.cli.output import print_json, stdout_console
from servelab.errors import ConfigError
from servelab.ranges import count, number
from servelab.speculative import measured, sources
from servelab.speculative.verdict import DEFAULT_DRAFT_COST, SpecVerdict, decide

MAX_DRAFT_TOKENS = 256  # draft tokens per step; the theory's tables grow with it
MAX_DRAFT_COST = 10.0  # a draft step ten times the target step is already a loss
MAX_TOK_S = 10_000_000.0


def register(app: typer.Typer) -> None:
    """Add `servelab spec` to the app."""

    @app.command("spec")
    def spec(
        logs: list[str] = typer.Argument(None, help="Engine logs with speculative lines ('-' = stdin)."),
        metrics_url: str = typer.Option(None, "--metrics-url", help="Read acceptance from URL/metrics."),
        accept_length: float = typer.Option(
            None, "--accept-length", help="Tokens per verify step, bonus included."
        ),
        accept_rate: float = typer.Option(
            None, "--accept-rate", help="Accepted / drafted tokens (0-1 or percent)."
        ),
        draft_tokens: int = typer.Option(
            None, "--draft-tokens", help=f"Draft tokens per step (gamma, 1-{MAX_DRAFT_TOKENS})."
        ),
        draft_cost: float = typer.Option(
            None,
            "--draft-cost",
            help=f"Draft step time / target step time (default {DEFAULT_DRAFT_COST}).",
        ),
        plan: Path = typer.Option(
            None, "--plan", help="Target plan JSON (servelab plan --json): draft cost from it."
        ),
        draft_plan: Path = typer.Option(
            None, "--draft-plan", help="Draft model's plan JSON: c = ceiling ratio."
        ),
        baseline_tok_s: float = typer.Option(
            None, "--baseline-tok-s", help="Decode tok/s without speculation."
        ),
        spec_tok_s: float = typer.Option(None, "--spec-tok-s", help="Decode tok/s with speculation."),
        baseline_run: str = typer.Option(
            None, "--baseline-run", help="Stored bench run without speculation."
        ),
        spec_run: str = typer.Option(None, "--spec-run", help="Stored bench run with speculation."),
        db: Path = typer.Option(None, "--db", help="Result store (default: the user data dir)."),
        as_json: bool = typer.Option(False, "--json", help="Print the verdict as JSON."),
    ) -> None:
        """Is speculative decoding paying off? Keep, tune or roll back, with the numbers."""
        _check_numbers(draft_tokens, draft_cost, baseline_tok_s, spec_tok_s)
        acceptance = _acceptance(logs or [], metrics_url, accept_length, accept_rate, draft_tokens)
        cost, cost_source = _draft_cost(draft_cost, plan, draft_plan)
        speedup = _measured(baseline_tok_s, spec_tok_s, baseline_run, spec_run, db)
        result = decide(acceptance, cost, speedup, cost_source)
        if as_json:
            print_json(result)
        else:
            _render(result)


def _acceptance(
    logs: list[str], url: str | None, length: float | None, rate: float | None, gamma: int | None
) -> sources.Acceptance:
    numbers = length is not None or rate is not None
    if sum((bool(logs), bool(url), numbers)) != 1:
        raise ConfigError(
            "give exactly one source of acceptance: LOG files, --metrics-url, or --accept-length/--accept-rate"
        )
    if logs:
        return sources.pool_acceptance(sources.observations_from_logs(logs, sys.stdin), "logs", gamma)
    if url:
        return sources.pool_acceptance(sources.observations_from_metrics(url), "metrics", gamma)
    if gamma is None:
        raise ConfigError("--accept-length/--accept-rate need --draft-tokens N (draft tokens per step)")
    return sources.from_numbers(gamma, length, rate)


def _check_numbers(
    draft_tokens: int | None, draft_cost: float | None, baseline_tok_s: float | None, spec_tok_s: float | None
) -> None:
    if draft_tokens is not None:
        count(draft_tokens, "--draft-tokens", 1, MAX_DRAFT_TOKENS, "tokens per step")
    if draft_cost is not None:
        number(draft_cost, "--draft-cost", 0, MAX_DRAFT_COST, "(draft step / target step)")
    for name, value in (("--baseline-tok-s", baseline_tok_s), ("--spec-tok-s", spec_tok_s)):
        if value is not None:
            number(value, name, 0, MAX_TOK_S, "tokens/s", above=True)


def _draft_cost(cost: float | None, plan: Path | None, draft_plan: Path | None) -> tuple[float, str]:
    if cost is not None and plan is not None:
        raise ConfigError("give --draft-cost or --plan, not both")
    if draft_plan is not None and plan is None:
        raise ConfigError("--draft-plan needs --plan (the target's plan)")
    if cost is not None:
        return cost, "--draft-cost"
    if plan is not None:
        return measured.draft_cost_from_plans(plan, draft_plan)
    return DEFAULT_DRAFT_COST, "default"


def _measured(
    baseline: float | None,
    spec: float | None,
    baseline_run: str | None,
    spec_run: str | None,
    db: Path | None,
) -> float | None:
    if (baseline is None) != (spec is None) or (baseline_run is None) != (spec_run is None):
        raise ConfigError(
            "measured speedup needs both --baseline-tok-s and --spec-tok-s (or both --baseline-run and --spec-run)"
        )
    if baseline is not None and baseline_run is not None:
        raise ConfigError("give tok/s figures or run ids, not both")
    if baseline_run is not None and spec_run is not None:  # both or neither, checked above
        baseline = measured.run_single_stream_tok_s(db, baseline_run)
        spec = measured.run_single_stream_tok_s(db, spec_run)
    if baseline is None or spec is None:
        return None
    if baseline <= 0:
        raise ConfigError("--baseline-tok-s must be above 0")
    return spec / baseline


def _render(result: SpecVerdict) -> None:
    console = stdout_console()
    measured_text = "-" if result.measured_speedup is None else f"{result.measured_speedup:.2f}x"
    rate = "-" if result.token_accept_rate is None else f"{result.token_accept_rate:.1%}"
    rows = [
        (
            "source",
            f"{result.acceptance_source}" + (f" ({result.engine}, {result.where})" if result.engine else ""),
        ),
        ("draft tokens per step", str(result.draft_tokens)),
        ("accept length (bonus incl.)", f"{result.expected_tokens_per_step:.3f}"),
        ("draft token acceptance", rate),
        ("alpha (per token)", f"{result.alpha:.3f}"),
        ("draft cost c", f"{result.draft_cost:.3g} ({result.draft_cost_source})"),
        ("predicted speedup", f"{result.predicted_speedup:.2f}x"),
        ("measured speedup", measured_text),
        ("best draft tokens", f"{result.best_draft_tokens} ({result.best_predicted_speedup:.2f}x)"),
    ]
    for name, value in rows:
        console.print(f"{name:<28} {value}", markup=False)
    console.print(f"verdict: {result.verdict.upper()} - {result.why}", markup=False)

"""Planner versus real engine logs: each figure a real vLLM / sglang / llama.cpp server printed in a public
thread (tests/fixtures/real-logs/) beside the plan for the same settings, then the median and worst |error|
per engine x figure and how often the fit verdict agrees with what the engine did.

    python benchmarks/plan_vs_real.py [--all]

Error % is (plan - engine) / |engine|; `ok` marks a figure within the case's tolerance. --all also lists the
figures that are not compared (and why: the card is unknown, the plan has no such figure ...). A figure whose
bytes are fitted on these cases (vLLM's CUDA-graph estimate, benchmarks/fit_graph_bytes.py) is also reported
cross-validated: each case under the fit without it. Pure arithmetic on recorded text: no GPU, no network.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.real_logs import Comparison, Outcome, load_cases, not_expressed, outcome

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fit_graph_bytes  # the script beside this one: the graph fit and its leave-one-case-out


def _number(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if abs(value) >= 1000 or value == int(value) else f"{value:,.3g}"


def figure_rows(outcomes: list[Outcome], everything: bool) -> list[str]:
    lines = ["| case | figure | engine | plan | error % | ok |", "|---|---|---|---|---|---|"]
    for o in outcomes:
        for c in o.comparisons:
            if c.error is None and not everything:
                continue
            error = f"{c.error:+.1%}" if c.error is not None else c.why
            ok = ("yes" if c.within else "no") if c.error is not None else ""
            lines.append(
                f"| {c.case} | {c.figure} | {_number(c.engine_value)} | {_number(c.plan_value)} | {error} | {ok} |"
            )
    return lines


def summary_rows(comparisons: list[Comparison]) -> list[str]:
    groups: dict[tuple[str, str], list[Comparison]] = defaultdict(list)
    for c in comparisons:
        if c.error is not None:
            groups[(c.engine, c.figure.split("[", 1)[0])].append(c)
    lines = [
        "| engine | figure | n | within tol. | median abs error % | worst abs error % | worst case |",
        "|---|---|---|---|---|---|---|",
    ]
    for (engine, figure), group in sorted(groups.items()):
        errors = [abs(c.error or 0.0) for c in group]
        worst = max(group, key=lambda c: abs(c.error or 0.0))
        lines.append(
            f"| {engine} | {figure} | {len(group)} | {sum(c.within for c in group)} |"
            f" {statistics.median(errors):.1%} | {max(errors):.1%} | {worst.case} |"
        )
    return lines


def fit_rows(outcomes: list[Outcome]) -> list[str]:
    lines = ["| case | engine started | plan fits | agrees |", "|---|---|---|---|"]
    for o in outcomes:
        if o.fit_agrees is None:
            continue
        fits = "error: " + o.error if o.plan is None else str(o.plan.fits).lower()
        agrees = "yes" if o.fit_agrees else "NO (optimistic)" if o.case.data["started"] is False else "NO"
        lines.append(f"| {o.case.name} | {str(o.case.data['started']).lower()} | {fits} | {agrees} |")
    checked = [o for o in outcomes if o.fit_agrees is not None]
    lines.append("")
    lines.append(
        f"fit verdict agrees on {sum(bool(o.fit_agrees) for o in checked)} of {len(checked)} cases with a"
        f" fit signal (started or refused, on a catalog card); {len(outcomes) - len(checked)} plannable cases"
        " have none"
    )
    return lines


def held_out_rows() -> list[str]:
    """The fitted figures' error with each case left out of the fit (the in-sample error is in the table)."""
    rows = fit_graph_bytes.rows()
    errors = [abs(e) for e in fit_graph_bytes.held_out(rows)]
    return [
        "| engine | figure | n | median abs error % held out | worst abs error % held out |",
        "|---|---|---|---|---|",
        f"| vllm | {fit_graph_bytes.FIGURE} (fitted: leave-one-case-out) | {len(rows)} |"
        f" {statistics.median(errors):.1%} | {max(errors):.1%} |",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--all", action="store_true", help="also list the figures not compared, and why")
    args = parser.parse_args()
    cases = load_cases()
    outcomes = [outcome(case) for case in cases if case.plannable]
    print(f"{len(cases)} cases, {len(outcomes)} plannable\n")
    print("\n".join(figure_rows(outcomes, args.all)))
    print()
    print("\n".join(summary_rows([c for o in outcomes for c in o.comparisons])))
    print()
    print("\n".join(held_out_rows()))
    print()
    print("\n".join(fit_rows(outcomes)))
    print("\nleft out of the medians (the case's `left_out`):")
    for o in outcomes:
        for c in o.comparisons:
            if c.why.startswith("left out: "):
                print(f"  {c.case} {c.figure}: {c.why.removeprefix('left out: ')}")
    print("\nsettings the plan could not be told:")
    for o in outcomes:
        missing = not_expressed(o.case)
        if missing or o.error:
            print(f"  {o.case.name}: {', '.join(missing)}{'; planner: ' + o.error if o.error else ''}")
    print("\nnot plannable:")
    for case in cases:
        if not case.plannable:
            print(f"  {case.name}: {' '.join(str(case.data['plannable_reason']).split())}")


if __name__ == "__main__":
    main()

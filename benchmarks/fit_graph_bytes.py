"""Fit vLLM's bytes per captured CUDA graph (servelab/engines/vllm/graphs.py GRAPH_BYTES_PER_LAYER) on every
real-log case that prints "Estimated CUDA graph memory", and print each case's leave-one-case-out error.

    python benchmarks/fit_graph_bytes.py

The procedure (docs/reference/memory.md §3 "CUDA-graph estimate"): vLLM's estimate is the largest first capture
plus (graphs - 1) x the second capture in each mode (`profile_cudagraph_memory`); servelab counts the graphs
exactly (graphs.graph_counts) and prices each as one figure per layer kind, so a case's estimate is
first + graph-equivalents x (attention layers x a + recurrent layers x r), where first is what only the first
capture allocates (graphs.FIRST_CAPTURE_BYTES) and graph-equivalents = 1 + sum over modes of (graphs - 1). The
three unknowns are solved by least squares on the relative error (each case's row divided by its printed
figure: a 0.13 GiB case weighs as much as a 1.32 GiB one). A case whose `left_out` names the estimate for a reason of its own (the GB10's
unified memory) is not used. Leave-one-case-out: the fit without the case, applied to the case. Pure arithmetic
on recorded text: no GPU, no network.
"""

from __future__ import annotations

import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy

from servelab.engines.vllm import graphs
from servelab.model.spec import LayerKind
from tests.real_logs import Case, case_model, load_cases, run_plan

FIGURE = "cuda_graph_estimated_gib"
GIB = 1024**3
MIB = 1024**2


@dataclass(frozen=True)
class Row:
    """One case: its graph-equivalents x layers of each kind, and the figure vLLM printed (bytes)."""

    case: str
    equivalents: int  # 1 + sum over modes of (graphs - 1)
    attention: float  # graph-equivalents x attention layers
    recurrent: float  # graph-equivalents x recurrent (Gated DeltaNet / Mamba) layers
    printed: float


def layer_counts(case: Case) -> tuple[int, int]:
    model = case_model(case)
    recurrent = model.count(LayerKind.LINEAR_ATTENTION) + model.count(LayerKind.MAMBA)
    return model.num_layers - recurrent, recurrent


def graph_equivalents(case: Case) -> int:
    """1 + sum over modes of (graphs - 1), read back from the plan's estimate (first + equivalents x one graph)."""
    plan = run_plan(case)
    per_graph = graphs.bytes_per_graph(case_model(case))
    return round((int(str(plan.details["cuda_graph_bytes"])) - graphs.FIRST_CAPTURE_BYTES) / per_graph)


def rows() -> list[Row]:
    found = []
    for case in load_cases():
        if not case.plannable or FIGURE not in (case.data.get("expected") or {}):
            continue
        if FIGURE in (case.data.get("left_out") or {}):
            continue
        equivalents = graph_equivalents(case)
        attention, recurrent = layer_counts(case)
        printed = float(case.data["expected"][FIGURE]) * GIB
        found.append(Row(case.name, equivalents, equivalents * attention, equivalents * recurrent, printed))
    return found


def fit(data: list[Row]) -> tuple[float, float, float]:
    """Least squares of the relative error: (first-capture bytes, bytes per attention layer, per recurrent layer).
    numpy's lstsq gives the minimum-norm answer where the cases cannot tell two figures apart."""
    matrix = numpy.array([[1.0, r.attention, r.recurrent] for r in data]) / numpy.array(
        [[r.printed] for r in data]
    )
    solution = numpy.linalg.lstsq(matrix, numpy.ones(len(data)), rcond=None)[0]
    return float(solution[0]), float(solution[1]), float(solution[2])


def predict(row: Row, coefficients: tuple[float, float, float]) -> float:
    return coefficients[0] + row.attention * coefficients[1] + row.recurrent * coefficients[2]


def main() -> None:
    data = rows()
    coefficients = fit(data)
    print(f"{len(data)} cases print the estimate (and are not left out for a reason of their own)")
    print(
        f"fit: FIRST_CAPTURE_MIB = {coefficients[0] / MIB:.3f}, ATTENTION_LAYER_MIB = {coefficients[1] / MIB:.3f},"
        f" RECURRENT_LAYER_MIB = {coefficients[2] / MIB:.3f}"
    )
    print("| case | graph-equivalents | printed GiB | in-sample % | leave-one-out % |\n|---|---|---|---|---|")
    errors = []
    for row in data:
        rest = [r for r in data if r.case != row.case]
        held_out = predict(row, fit(rest)) / row.printed - 1
        in_sample = predict(row, coefficients) / row.printed - 1
        errors.append(abs(held_out))
        print(
            f"| {row.case} | {row.equivalents} | {row.printed / GIB:.2f} | {in_sample:+.1%} | {held_out:+.1%} |"
        )
    print(f"\nmedian |leave-one-out error| {statistics.median(errors):.1%}, worst {max(errors):.1%}")


if __name__ == "__main__":
    main()

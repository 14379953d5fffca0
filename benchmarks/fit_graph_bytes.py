"""Fit vLLM's CUDA-graph estimate figures (servelab/engines/vllm/graphs.py: POOL_BYTES_PER_TOKEN_LAYER_HIDDEN,
ATTENTION_LAYER_MIB, RECURRENT_LAYER_MIB) on every real-log case that prints "Estimated CUDA graph memory", and
print each case's leave-one-case-out error.

    python benchmarks/fit_graph_bytes.py

The procedure (docs/reference/memory.md §3 "CUDA-graph estimate"): vLLM's estimate is the largest first capture
plus (graphs - 1) x the second capture in each mode (`profile_cudagraph_memory`). servelab counts the graphs
exactly (graphs.graph_counts, from the plan's batch limits, speculative tokens and the case's compilation config)
and writes the estimate as
    p x largest size x layers x hidden size + graph-equivalents x (attention layers x a + recurrent layers x r)
(the first capture's pool activations at its size, then one graph per graph-equivalent, 1 + sum over modes of
(graphs - 1)), plus what the source states outright: FlashInfer's decode workspace in the first FULL capture
(memory.graph_parts), which reuses the PIECEWISE first capture's activations (graphs.first_captures; where it is
the largest, its pool term is the FULL sizes beyond the PIECEWISE ones, none in vLLM's own counts). The three
unknowns are solved by least squares on the relative error (each case's row divided by its printed figure: a
0.08 GiB case weighs as much as a 1.32 GiB one). A case whose `left_out` names the estimate (the GB10's unified
memory, the GGUF case's kernels) is not used. Leave-one-case-out: the fit without the case, applied to the case. Pure
arithmetic on recorded text: no GPU, no network.
"""

from __future__ import annotations

import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy

from servelab.engines.vllm import graphs, memory
from servelab.engines.vllm.settings import VllmSettings, compilation
from servelab.model.spec import LayerKind, ModelSpec
from tests.real_logs import Case, case_gpu, case_model, load_cases, run_plan

FIGURE = "cuda_graph_estimated_gib"
GIB = 1024**3
MIB = 1024**2
Coefficients = tuple[
    float, float, float
]  # bytes per token x layer x hidden unit, per attention layer, per recurrent


@dataclass(frozen=True)
class Row:
    """One case: the estimate's three terms without their figures, and the figure vLLM printed (bytes)."""

    case: str
    counts: str  # as vLLM's "Profiling CUDA graph memory" line reads
    pool: float  # largest size x layers x hidden size
    attention: float  # graph-equivalents x attention layers
    recurrent: float  # graph-equivalents x recurrent (Gated DeltaNet / Mamba) layers
    printed: float
    known: float = 0.0  # bytes the source states (FlashInfer's workspace in the first FULL capture)


def case_parts(case: Case) -> tuple[dict[str, tuple[int, int]], int]:
    """The graphs the plan counts for the case and the workspace its first FULL capture holds (checked against
    the plan's own estimate)."""
    plan = run_plan(case)
    details = plan.details
    model = case_model(case)
    config = (case.data.get("settings") or {}).get("compilation_config")
    settings = VllmSettings(compilation_config=json.dumps(config) if config else None)
    counts, workspace = memory.graph_parts(
        model,
        int(str(details["max_num_seqs"])),
        int(str(details["max_num_batched_tokens"])),
        int(str(details.get("speculative_tokens") or 0)),
        compilation(settings),
        compute_capability=case_gpu(case).compute_capability,
        kv_cache_dtype=plan.kv_dtype,
        tp=plan.tensor_parallel,
        attention_groups=memory.attention_groups(model),
        version=str(details.get("engine_version") or "") or None,
    )
    if graphs.estimate_bytes(model, counts, workspace) != int(str(details["cuda_graph_bytes"])):
        raise SystemExit(f"{case.name}: the counts here are not the plan's")
    return counts, workspace


def row(case: Case) -> Row:
    model = case_model(case)
    counts, workspace = case_parts(case)
    recurrent = model.count(LayerKind.LINEAR_ATTENTION) + model.count(LayerKind.MAMBA)
    equivalents = graphs.graph_equivalents(counts)
    largest, known = first_capture_terms(model, counts, workspace)
    return Row(
        case=case.name,
        counts=graphs.counts_line(counts),
        pool=float(largest * model.num_layers * model.hidden_size),
        attention=float(equivalents * (model.num_layers - recurrent)),
        recurrent=float(equivalents * recurrent),
        printed=float(case.data["expected"][FIGURE]) * GIB,
        known=float(known),
    )


def first_capture_terms(
    model: ModelSpec, counts: dict[str, tuple[int, int]], workspace: int
) -> tuple[int, int]:
    """(the size whose pool activations the largest first capture holds, the bytes it holds besides them) for
    the linear fit: the largest of graphs.first_captures at the shipped figures. The FULL first capture holds the
    workspace and only the activations beyond the PIECEWISE one's (graphs.first_captures)."""
    firsts = graphs.first_captures(model, counts, workspace)
    mode = list(counts)[firsts.index(max(firsts))]
    piecewise = counts["PIECEWISE"][1] if "PIECEWISE" in counts else 0
    if mode == "FULL":
        return max(0, counts["FULL"][1] - piecewise), workspace
    return counts[mode][1], 0


def rows() -> list[Row]:
    found = []
    for case in load_cases():
        if not case.plannable or FIGURE not in (case.data.get("expected") or {}):
            continue
        if FIGURE in (case.data.get("left_out") or {}):
            continue
        found.append(row(case))
    return found


def fit(data: list[Row]) -> Coefficients:
    """Least squares of the relative error; numpy's lstsq gives the minimum-norm answer where the cases cannot
    tell two figures apart."""
    matrix = numpy.array([[r.pool, r.attention, r.recurrent] for r in data]) / numpy.array(
        [[r.printed] for r in data]
    )
    target = numpy.array([1 - r.known / r.printed for r in data])
    solution = numpy.linalg.lstsq(matrix, target, rcond=None)[0]
    return float(solution[0]), float(solution[1]), float(solution[2])


def predict(row: Row, coefficients: Coefficients) -> float:
    pool, attention, recurrent = coefficients
    return row.known + row.pool * pool + row.attention * attention + row.recurrent * recurrent


def held_out(data: list[Row]) -> list[float]:
    """Each case's relative error under the fit without it."""
    return [predict(r, fit([o for o in data if o.case != r.case])) / r.printed - 1 for r in data]


def main() -> None:
    data = rows()
    coefficients = fit(data)
    print(f"{len(data)} cases print the estimate (and are not left out for a reason of their own)")
    print(
        f"fit: POOL_BYTES_PER_TOKEN_LAYER_HIDDEN = {coefficients[0]:.3f},"
        f" ATTENTION_LAYER_MIB = {coefficients[1] / MIB:.3f}, RECURRENT_LAYER_MIB = {coefficients[2] / MIB:.3f}"
    )
    print("| case | graphs | printed GiB | in-sample % | leave-one-out % |\n|---|---|---|---|---|")
    errors = held_out(data)
    for r, error in zip(data, errors, strict=True):
        in_sample = predict(r, coefficients) / r.printed - 1
        print(f"| {r.case} | {r.counts} | {r.printed / GIB:.2f} | {in_sample:+.1%} | {error:+.1%} |")
    absolute = [abs(e) for e in errors]
    print(f"\nmedian |leave-one-out error| {statistics.median(absolute):.1%}, worst {max(absolute):.1%}")


if __name__ == "__main__":
    main()

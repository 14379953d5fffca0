"""vLLM's CUDA graphs: which it captures, and the memory estimate it takes out of the KV budget from v0.21.0
(docs/reference/memory.md §3 "CUDA-graph estimate").

What the source fixes (read in vllm `vllm/config/vllm.py` `_set_cudagraph_sizes`, `vllm/config/compilation.py`
`adjust_cudagraph_sizes_for_spec_decode`, `vllm/v1/worker/gpu_model_runner.py` `profile_cudagraph_memory`):
- capture sizes: max_cudagraph_capture_size = min(max_num_seqs x (1 + speculative tokens) x 2, 512), never above
  max_num_batched_tokens; sizes [1, 2, 4] + multiples of 8 below 256 + multiples of 16 from 256, up to it
  (or the compilation config's own list, cut at max_num_batched_tokens). With speculative decoding and full
  graphs each size is rounded up to a multiple of 1 + speculative tokens, those above the largest dropped.
- graphs per mode: PIECEWISE one per capture size; FULL (uniform decode) one per size up to max_num_seqs x
  (1 + speculative tokens); FULL_AND_PIECEWISE (the V1 default) both; FULL and FULL_DECODE_ONLY only the FULL
  set (FULL over every size); NONE and --enforce-eager none.
- the estimate: per mode, the first capture (the largest) and the second are measured; estimate = the largest
  first capture over the modes + the sum over modes of (graphs - 1) x max(second capture, 1 MiB).

What it does not fix is the bytes of one capture: those are the kernels' and the driver's (a graph's nodes,
the piecewise pieces' buffers). servelab prices one graph per layer kind, fitted (GRAPH_BYTES_PER_LAYER below)
and takes the first capture as one such graph.
"""

from __future__ import annotations

from dataclasses import dataclass

from servelab.errors import ConfigError
from servelab.model.spec import LayerKind, ModelSpec

MIB = 1024**2
MAX_CAPTURE = 512  # _set_cudagraph_sizes: min(max_num_seqs x decode query length x 2, 512)
PER_GRAPH_FLOOR = MIB  # profile_cudagraph_memory: "Use at least 1 MiB per graph for driver overhead"
MODES = ("NONE", "PIECEWISE", "FULL", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE")
# Bytes one captured graph holds per layer of each kind, fitted on the two logs that print the estimate of a
# model with a single kind of layer change between them (least squares through the origin, one unknown each,
# first capture counted as one graph): Qwen3-8B at 0.21.0 (36 attention layers; PIECEWISE 51 + FULL 35 graphs,
# "Estimated CUDA graph memory: 0.52 GiB", LMCache issue 3430) gives 0.52 GiB / 85 / 36 = 0.174 MiB an
# attention layer; a Qwen3.6-27B int4 at 0.27.1 (16 attention + 48 Gated DeltaNet layers; PIECEWISE 16,
# 0.36 GiB, gpustack/runner PR 251) then gives (0.36 GiB / 16 - 16 x 0.174 MiB) / 48 = 0.422 MiB a recurrent
# layer. Held-out checks in docs/reference/memory.md §3 (two-mode 0.09 GiB and TP4 0.17 GiB logs of the same
# 27B, a TP4 Qwen3.5-35B-A3B at 0.26.0: within 8 %). Not TP-dependent: the 27B's TP2 and TP4 logs give 23 and
# 25 MiB a graph.
GRAPH_BYTES_PER_LAYER = {"attention": int(0.174 * MIB), "recurrent": int(0.422 * MIB)}


@dataclass(frozen=True)
class Compilation:
    """The compilation config's CUDA-graph knobs as a launch gives them (None: vLLM's default)."""

    cudagraph_mode: str | None = None
    cudagraph_capture_sizes: tuple[int, ...] | None = None
    max_cudagraph_capture_size: int | None = None

    def __post_init__(self) -> None:
        if self.cudagraph_mode is not None and self.cudagraph_mode.upper() not in MODES:
            raise ConfigError(
                f"vLLM cudagraph_mode {self.cudagraph_mode!r} is not one of: {', '.join(MODES)}"
            )
        sizes = self.cudagraph_capture_sizes
        if sizes is not None and (not sizes or any(s < 1 for s in sizes)):
            raise ConfigError("vLLM cudagraph_capture_sizes must list whole batch sizes of 1 or more")
        if self.max_cudagraph_capture_size is not None and self.max_cudagraph_capture_size < 1:
            raise ConfigError("vLLM max_cudagraph_capture_size must be 1 or more")

    def mode(self, enforce_eager: bool) -> str:
        """The mode vLLM runs: NONE under --enforce-eager, FULL_AND_PIECEWISE unless the config names one."""
        if enforce_eager:
            return "NONE"
        return (self.cudagraph_mode or "FULL_AND_PIECEWISE").upper()


def capture_sizes(
    max_num_seqs: int, batched: int, spec_tokens: int, compilation: Compilation, full: bool
) -> list[int]:
    """The batch sizes captured (ascending), as _set_cudagraph_sizes and the spec-decode rounding leave them."""
    query = 1 + spec_tokens
    largest = compilation.max_cudagraph_capture_size or min(max_num_seqs * query * 2, MAX_CAPTURE)
    largest = min(largest, batched)
    if compilation.cudagraph_capture_sizes is not None:
        sizes = sorted({s for s in compilation.cudagraph_capture_sizes if s <= batched})
    else:
        sizes = [s for s in (1, 2, 4) if s <= largest]
        sizes += list(range(8, min(largest + 1, 256), 8)) + list(range(256, largest + 1, 16))
    if spec_tokens and full and sizes:
        rounded = sorted({up for up in (-(-s // query) * query for s in sizes) if up <= largest})
        sizes = rounded or ([query] if query <= largest else [])
    return sizes


def graph_counts(
    max_num_seqs: int,
    batched: int,
    spec_tokens: int = 0,
    compilation: Compilation | None = None,
    enforce_eager: bool = False,
) -> dict[str, tuple[int, int]]:
    """{mode: (graphs, largest size)} as vLLM's "Profiling CUDA graph memory: PIECEWISE=n (largest=s), FULL=..."
    line reads; empty when no graph is captured."""
    compilation = compilation or Compilation()
    mode = compilation.mode(enforce_eager)
    if mode == "NONE":
        return {}
    full = "FULL" in mode
    sizes = capture_sizes(max_num_seqs, batched, spec_tokens, compilation, full)
    decode = [s for s in sizes if s <= max_num_seqs * (1 + spec_tokens)]
    sets = {
        "FULL_AND_PIECEWISE": {"PIECEWISE": sizes, "FULL": decode},
        "PIECEWISE": {"PIECEWISE": sizes},
        "FULL": {"FULL": sizes},
        "FULL_DECODE_ONLY": {"FULL": decode},
    }[mode]
    return {name: (len(s), s[-1]) for name, s in sets.items() if s}


def bytes_per_graph(model: ModelSpec) -> int:
    """One captured graph (GRAPH_BYTES_PER_LAYER over the model's layers), at least vLLM's 1 MiB floor."""
    recurrent = model.count(LayerKind.LINEAR_ATTENTION) + model.count(LayerKind.MAMBA)
    attention = model.num_layers - recurrent
    per_graph = (
        attention * GRAPH_BYTES_PER_LAYER["attention"] + recurrent * GRAPH_BYTES_PER_LAYER["recurrent"]
    )
    return max(PER_GRAPH_FLOOR, per_graph)


def estimate_bytes(model: ModelSpec, counts: dict[str, tuple[int, int]]) -> int:
    """profile_cudagraph_memory's sum: the largest first capture over the modes plus (graphs - 1) x one graph
    in each mode."""
    if not counts:
        return 0
    per_graph = bytes_per_graph(model)
    return per_graph + sum((graphs - 1) * per_graph for graphs, _ in counts.values())


def counts_line(counts: dict[str, tuple[int, int]]) -> str:
    """The counts as vLLM logs them ("PIECEWISE=51 (largest=512), FULL=35 (largest=256)")."""
    return ", ".join(f"{mode}={n} (largest={largest})" for mode, (n, largest) in counts.items())

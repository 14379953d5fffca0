"""vLLM's CUDA graphs: which it captures, and the memory estimate it takes out of the KV budget from v0.20.0
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
  first capture over the modes + the sum over modes of (graphs - 1) x max(second capture, 1 MiB). PIECEWISE is
  captured before FULL, after one `empty_cache`, in one profiling pool, so the FULL first capture reuses the
  activations the PIECEWISE one left (`first_captures`; v0.19.1 gpu_model_runner.py 5896-5926,
  cudagraph_dispatcher.py `get_capture_descs`, compilation/cuda_graph.py `weak_ref_tensors` of each output).

- FlashInfer's decode workspace (vllm#50780): where FlashInfer runs the attention with its own decode wrapper, the
  first FULL capture's warm-up builds the profiling attention builder's workspace inside the measured window
  (`_get_workspace_buffer`, lazy), one per attention KV-cache group: 394 MiB (VLLM_FLASHINFER_WORKSPACE_BUFFER_SIZE)
  up to v0.25, max(394 MiB, max_num_batched_tokens x query heads per GPU x head dim x 16 B) from v0.26.0 (PR 48428).
  FlashInfer is the default attention backend on SM10x and wherever FlashAttention cannot hold the KV cache dtype
  (fp8 outside Hopper's FA3, fp8_e5m2 everywhere); its decode is trtllm-gen on SM10x and XQA on SM90 from v0.25.0,
  which use a module-global 394 MiB buffer instead (`_get_trtllm_workspace_buffer`), first allocated by the same
  warm-up, so charged once. FlashInfer's own decode cannot run full graphs with speculative decoding
  (UNIFORM_SINGLE_TOKEN_DECODE), so vLLM drops to PIECEWISE then.

What it does not fix is the bytes of a capture: those are the kernels', the driver's and the caching allocator's.
servelab prices the first capture's pool activations per token, layer and hidden unit and one graph as a figure
per layer kind, the three fitted on every real log that prints the estimate (benchmarks/fit_graph_bytes.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from servelab.errors import ConfigError
from servelab.model.spec import LayerKind, ModelSpec

MIB = 1024**2
MAX_CAPTURE = 512  # _set_cudagraph_sizes: min(max_num_seqs x decode query length x 2, 512)
PER_GRAPH_FLOOR = MIB  # profile_cudagraph_memory: "Use at least 1 MiB per graph for driver overhead"
# benchmarks/fit_graph_bytes.py's output, rounded to 3 decimals (see the comment below):
POOL_BYTES_PER_TOKEN_LAYER_HIDDEN = 3.278
ATTENTION_LAYER_MIB = 0.097
RECURRENT_LAYER_MIB = 0.386
MODES = ("NONE", "PIECEWISE", "FULL", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE")
# FlashInfer's workspace (docs/reference/memory.md §3 "FlashInfer's decode workspace", vllm#50780):
FLASHINFER_WORKSPACE_BYTES = (
    394 * MIB
)  # envs.py VLLM_FLASHINFER_WORKSPACE_BUFFER_SIZE default (v0.20.0-v0.27.1)
FLASHINFER_WORKSPACE_BYTES_PER_ELEM = (
    16  # flashinfer.py FLASHINFER_PREFILL_WORKSPACE_BYTES_PER_ELEM (v0.26.0 85)
)
WORKSPACE_BY_BATCH = (0, 26, 0)  # PR 48428: the workspace sized by max_num_batched_tokens (absent in v0.25.0)
XQA_DECODE = (0, 25, 0)  # utils/flashinfer.py supports_trtllm_attention: SM90 decodes with XQA from v0.25.0
FLASH_ATTN_KV_DTYPES = (
    "auto",
    "bfloat16",
    "float16",
    "bf16",
    "fp16",
)  # flash_attn.py supports_kv_cache_dtype
FA3_FP8_KV_DTYPES = ("fp8", "fp8_e4m3")  # FlashAttention 3 on SM90 only
# The bytes of a capture, which vLLM measures (the free-memory drop around each capture) and does not state. The
# estimate is first capture + sum over modes of (graphs - 1) x second capture. The first capture is of the
# largest size into a fresh profiling pool, so it holds the pool's activations at that size (each piece's output
# stays in the pool for the next graph to reuse): written here as POOL_BYTES_PER_TOKEN_LAYER_HIDDEN x largest
# size x layers x hidden size, plus one graph. One graph is a figure per layer kind (each layer adds its kernels'
# nodes, and under PIECEWISE its own piece, to every graph). The three figures are fitted by
# benchmarks/fit_graph_bytes.py (least squares of the relative error over every real-log case that prints
# "Estimated CUDA graph memory"; docs/reference/memory.md §3 lists each case's leave-one-case-out error);
# tests/unit/test_engines_vllm_graphs.py checks these are that fit's output, rounded.
GRAPH_BYTES_PER_LAYER = {
    "attention": int(ATTENTION_LAYER_MIB * MIB),
    "recurrent": int(RECURRENT_LAYER_MIB * MIB),
}


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


def _capability(compute_capability: str | None) -> tuple[int, int] | None:
    if not compute_capability:
        return None
    major, _, minor = compute_capability.partition(".")
    return int(major), int(minor or 0)


def attention_backend(
    compute_capability: str | None, kv_cache_dtype: str = "auto", asked: str | None = None
) -> str:
    """The attention backend: `asked` (--attention-backend, vLLM's enum name in any case) where given, else the one
    vLLM picks (platforms/cuda.py `_get_backend_priorities`, the same order in v0.20.0-v0.27.1): FlashInfer first
    on SM10x, else FlashAttention unless it cannot hold the KV cache dtype (flash_attn.py
    `supports_kv_cache_dtype`: fp8 / fp8_e4m3 only with FA3 on SM90), then FlashInfer. 'FLASHINFER',
    'FLASH_ATTN', or '' off CUDA (no capability: ROCm, CPU; not modelled)."""
    capability = _capability(compute_capability)
    if capability is None:
        return ""
    if asked:
        return asked.upper()
    if capability[0] == 10:
        return "FLASHINFER"
    dtype = kv_cache_dtype.lower()
    if dtype in FLASH_ATTN_KV_DTYPES or (dtype in FA3_FP8_KV_DTYPES and capability == (9, 0)):
        return "FLASH_ATTN"
    return "FLASHINFER"


def flashinfer_native_decode(compute_capability: str | None, version: tuple[int, int, int]) -> bool:
    """Whether FlashInfer decodes with its own wrapper (on the builder's workspace) rather than trtllm-gen (SM10x)
    or XQA (SM90 from v0.25.0), which `supports_trtllm_attention` allows (utils/flashinfer.py)."""
    capability = _capability(compute_capability)
    if capability is None:
        return False
    return capability[0] != 10 and not (capability == (9, 0) and version >= XQA_DECODE)


def flashinfer_workspace_bytes(
    version: tuple[int, int, int], batched: int, heads_per_gpu: int, head_dim: int
) -> int:
    """One FlashInfer attention builder's workspace (flashinfer.py `_get_workspace_buffer`): 394 MiB, from v0.26.0
    at least max_num_batched_tokens x query heads per GPU x head dim x 16 B ("Size to the batch's head footprint;
    never shrink below the configured default", v0.26.0 936-959)."""
    if version < WORKSPACE_BY_BATCH:
        return FLASHINFER_WORKSPACE_BYTES
    by_batch = batched * heads_per_gpu * head_dim * FLASHINFER_WORKSPACE_BYTES_PER_ELEM
    return max(FLASHINFER_WORKSPACE_BYTES, by_batch)


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
    single_token_decode: bool = False,
) -> dict[str, tuple[int, int]]:
    """{mode: (graphs, largest size)} as vLLM's "Profiling CUDA graph memory: PIECEWISE=n (largest=s), FULL=..."
    line reads; empty when no graph is captured. `single_token_decode`: the attention backend runs full graphs
    only for one-token decodes (FlashInfer's own decode, AttentionCGSupport.UNIFORM_SINGLE_TOKEN_DECODE), so with
    speculative tokens vLLM sets the mode to PIECEWISE ("is not supported with spec-decode for attention backend
    FlashInferBackend ... setting cudagraph_mode=PIECEWISE", config/compilation.py, v0.26.0 1425-1440)."""
    compilation = compilation or Compilation()
    mode = compilation.mode(enforce_eager)
    if mode == "NONE":
        return {}
    if single_token_decode and spec_tokens and "FULL" in mode:
        mode = "PIECEWISE"
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


def graph_equivalents(counts: dict[str, tuple[int, int]]) -> int:
    """The graphs the estimate charges: the first capture counted once plus (graphs - 1) in each mode."""
    return 1 + sum(graphs - 1 for graphs, _ in counts.values()) if counts else 0


def largest_capture(counts: dict[str, tuple[int, int]]) -> int:
    """The batch size of the first capture (the largest over the modes; 0 when nothing is captured)."""
    return max((largest for _, largest in counts.values()), default=0)


def first_capture_pool_bytes(model: ModelSpec, largest: int) -> int:
    """What the first capture's activations leave in the fresh profiling pool at the largest size."""
    return int(POOL_BYTES_PER_TOKEN_LAYER_HIDDEN * largest * model.num_layers * model.hidden_size)


def estimate_bytes(model: ModelSpec, counts: dict[str, tuple[int, int]], full_workspace: int = 0) -> int:
    """profile_cudagraph_memory's sum: the largest first capture over the modes (`first_captures`: its pool
    activations plus one graph; the FULL one holds `full_workspace`, what its warm-up allocates and keeps,
    FlashInfer's decode workspace) plus (graphs - 1) x one graph in each mode."""
    if not counts:
        return 0
    return max(first_captures(model, counts, full_workspace)) + graph_equivalents(counts) * bytes_per_graph(
        model
    )


def first_captures(
    model: ModelSpec, counts: dict[str, tuple[int, int]], full_workspace: int = 0
) -> list[int]:
    """What each mode's first capture adds to the free-memory drop, in vLLM's order (PIECEWISE, then FULL:
    cudagraph_dispatcher.py `get_capture_descs`). The FULL one runs after the PIECEWISE captures in the same
    profiling pool, whose activations its graph capture reuses (CUDAGraphWrapper releases each output to the pool,
    `weak_ref_tensors`), as its eager warm-up reuses the blocks the caching allocator kept from the PIECEWISE
    warm-up (one `empty_cache` before all the captures): so it adds only the activations beyond the PIECEWISE
    first capture's, plus what is new to it, FlashInfer's workspace (`full_workspace`)."""
    piecewise = counts.get("PIECEWISE")
    earlier = first_capture_pool_bytes(model, piecewise[1]) if piecewise else 0
    firsts = []
    for mode, (_, largest) in counts.items():
        pool = first_capture_pool_bytes(model, largest)
        firsts.append(max(0, pool - earlier) + full_workspace if mode == "FULL" else pool)
    return firsts


def counts_line(counts: dict[str, tuple[int, int]]) -> str:
    """The counts as vLLM logs them ("PIECEWISE=51 (largest=512), FULL=35 (largest=256)")."""
    return ", ".join(f"{mode}={n} (largest={largest})" for mode, (n, largest) in counts.items())

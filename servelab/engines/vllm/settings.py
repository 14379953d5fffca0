"""vLLM's own knobs as `plan`/`predict` take them (`servelab plan MODEL --engine vllm -- --max-num-seqs 64`), and the
figures its planners hand its scheduler and save (the contract: servelab/sizing/typed.py)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from servelab.engines.vllm.graphs import Compilation
from servelab.errors import ConfigError
from servelab.sizing.typed import (
    MAX_CONTEXT,
    MAX_PARALLEL,
    Figures,
    SpeculativeWords,
    check_whole,
    json_name,
    setting,
)

MAX_KV_CACHE_SPACE_GIB = 1 << 20
BACKEND_WORD = re.compile(
    r"[A-Za-z][A-Za-z0-9_]{0,39}"
)  # an AttentionBackendEnum name (FLASH_ATTN, FLASHINFER …)
MAX_SPECULATIVE_TOKENS = 16  # servelab.sizing.fit.MAX_SPECULATIVE_TOKENS
# --speculative-config's methods (vllm/config/speculative.py) in servelab's terms; the model-specific MTP names
# (deepseek_mtp, qwen3_next_mtp …) are the model's own MTP layers
SPECULATIVE_METHODS = {
    "mtp": "mtp",
    "eagle": "eagle",
    "eagle3": "eagle",
    "ngram": "ngram",
    "draft_model": "draft",
}


@dataclass(frozen=True, kw_only=True)
class VllmSettings:
    """vLLM's flags (and the CPU backend's environment variable) the planner prices; None/False: not given."""

    gpu_memory_utilization: float | None = setting(
        "--gpu-memory-utilization", "share of the GPU vLLM may hold (default 0.9)"
    )
    max_num_seqs: int | None = setting("--max-num-seqs", "running sequences (default: --parallel when > 1)")
    max_num_batched_tokens: int | None = setting("--max-num-batched-tokens", "tokens one step schedules")
    kv_cache_memory_bytes: int | None = setting(
        "--kv-cache-memory-bytes", "the KV pool per GPU in bytes (no memory profiling)"
    )
    enable_prefix_caching: bool | None = setting(
        "--[no-]enable-prefix-caching", "prefix caching (default vLLM's: off for hybrids)"
    )
    language_model_only: bool = setting(
        "--language-model-only",
        "a vision-language checkpoint served as text only (or --limit-mm-per-prompt, every modality 0)",
        False,
    )
    kv_cache_space_gib: int | None = setting(
        "VLLM_CPU_KVCACHE_SPACE=N", "the CPU backend's KV pool in whole GiB (environment; default 1)"
    )
    use_v1: bool | None = setting(
        "VLLM_USE_V1=N",
        "the V1 engine, 0 or 1 (environment; default the release's: off on 0.7.x, on from 0.8)",
    )
    enforce_eager: bool = setting(
        "--enforce-eager",
        "no CUDA graphs: their memory stays free (the eager step cost is not priced yet)",
        False,
    )
    enable_expert_parallel: bool = setting(
        "--enable-expert-parallel", "experts split over the GPUs, not sliced (carried; not priced yet)", False
    )
    speculative_config: str | None = setting(
        "--speculative-config",
        "JSON: method (mtp, eagle, eagle3, ngram, draft_model), num_speculative_tokens, model (the draft)",
    )
    attention_backend: str | None = setting(
        "--attention-backend",
        "the attention kernels (FLASH_ATTN, FLASHINFER, TRITON_ATTN …; default vLLM's by card and KV dtype):"
        " FlashInfer's decode workspace in the graph estimate",
    )
    compilation_config: str | None = setting(
        "--compilation-config",
        "JSON: cudagraph_mode (NONE, PIECEWISE, FULL, FULL_DECODE_ONLY, FULL_AND_PIECEWISE),"
        " cudagraph_capture_sizes, max_cudagraph_capture_size: the CUDA graphs captured and their memory",
    )

    def __post_init__(self) -> None:
        util = self.gpu_memory_utilization
        if util is not None and not (
            isinstance(util, int | float) and not isinstance(util, bool) and 0 < util <= 1
        ):
            raise ConfigError(f"vLLM --gpu-memory-utilization must be in (0, 1], got {util}")
        check_whole(self.max_num_seqs, "--max-num-seqs", 1, MAX_PARALLEL, "sequences")
        check_whole(self.max_num_batched_tokens, "--max-num-batched-tokens", 1, MAX_CONTEXT, "tokens")
        check_whole(self.kv_cache_memory_bytes, "--kv-cache-memory-bytes", 1, 2**50, "bytes")
        check_whole(self.kv_cache_space_gib, "VLLM_CPU_KVCACHE_SPACE", 1, MAX_KV_CACHE_SPACE_GIB, "GiB")
        if self.use_v1 not in (None, True, False):
            raise ConfigError(f"VLLM_USE_V1 is on or off, got {self.use_v1!r}")
        for flag, switch in (
            ("--language-model-only", self.language_model_only),
            ("--enforce-eager", self.enforce_eager),
            ("--enable-expert-parallel", self.enable_expert_parallel),
        ):
            if not isinstance(switch, bool):
                raise ConfigError(f"{flag} is a switch, got {switch!r}")
        backend = self.attention_backend
        if backend is not None and not (isinstance(backend, str) and BACKEND_WORD.fullmatch(backend)):
            raise ConfigError(
                f"vLLM --attention-backend {backend!r}: give one backend name (FLASH_ATTN, FLASHINFER …)"
            )
        if self.speculative_config is not None:
            speculative_words(self)  # one line naming the flag when the JSON is not one servelab plans
        compilation(self)  # one line naming the flag when the JSON is not one servelab reads


def speculative_words(settings: VllmSettings) -> SpeculativeWords | None:
    """--speculative-config in servelab's terms (None: not given); a config servelab cannot plan is one line."""
    if settings.speculative_config is None:
        return None
    config = _config_object(settings.speculative_config)
    method = str(config.get("method", ""))
    kind = "mtp" if method.endswith("_mtp") else SPECULATIVE_METHODS.get(method)
    if kind is None:
        raise ConfigError(
            f"vLLM --speculative-config method {method!r}: servelab plans {', '.join(SPECULATIVE_METHODS)}"
        )
    tokens = config.get("num_speculative_tokens")
    if isinstance(tokens, bool) or not isinstance(tokens, int) or not 1 <= tokens <= MAX_SPECULATIVE_TOKENS:
        raise ConfigError(
            f"vLLM --speculative-config num_speculative_tokens must be 1 to {MAX_SPECULATIVE_TOKENS}, got {tokens!r}"
        )
    draft = config.get("model")
    if kind in ("eagle", "draft") and not isinstance(draft, str):
        raise ConfigError(
            f"vLLM --speculative-config method {method} needs model: the draft (an id or a path)"
        )
    return SpeculativeWords(kind, tokens, draft if isinstance(draft, str) else "")


def compilation(settings: VllmSettings) -> Compilation:
    """--compilation-config's CUDA-graph knobs (the others are not priced); a value of the wrong kind is one line."""
    if settings.compilation_config is None:
        return Compilation()
    config = _config_object(settings.compilation_config, "--compilation-config")
    mode = config.get("cudagraph_mode")
    sizes = config.get("cudagraph_capture_sizes")
    largest = config.get("max_cudagraph_capture_size")
    if mode is not None and not isinstance(mode, str):
        raise ConfigError(f"vLLM --compilation-config cudagraph_mode must be a name, got {mode!r}")
    if sizes is not None and not (
        isinstance(sizes, list) and all(isinstance(n, int) and not isinstance(n, bool) for n in sizes)
    ):
        raise ConfigError(
            f"vLLM --compilation-config cudagraph_capture_sizes must list whole numbers, got {sizes!r}"
        )
    if largest is not None and (isinstance(largest, bool) or not isinstance(largest, int)):
        raise ConfigError(
            f"vLLM --compilation-config max_cudagraph_capture_size must be whole, got {largest!r}"
        )
    return Compilation(mode, None if sizes is None else tuple(sizes), largest)


def _config_object(text: str, flag: str = "--speculative-config") -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"vLLM {flag} is not JSON ({exc.msg}): give a JSON object") from None
    if not isinstance(value, dict):
        raise ConfigError(f"vLLM {flag} must be a JSON object")
    return value


@dataclass(frozen=True, kw_only=True)
class VllmFigures(Figures):
    """What the plan found (vLLM's own names: the KV pool in blocks, the running and per-step caps); the scheduler
    reads the pool and the caps. None: not a figure of this device's plan (GPU or CPU backend). In the order the
    plans have always listed them."""

    kv_cache_space_gib: int | None = json_name("VLLM_CPU_KVCACHE_SPACE")
    numa_node_bytes: int | None = None
    gpu_memory_utilization: float | None = None
    kv_budget_bytes: int | None = None
    block_size: int
    num_blocks: int
    kv_tokens: int
    padding_layers: int
    mamba_padding_pct: float | None = None
    max_concurrency: float
    max_num_seqs: int
    max_num_batched_tokens: int | None = None  # the CPU plan: vLLM's default
    estimated_max_model_len: int
    mamba_blocks: int
    enforce_eager: bool | None = None  # True: no CUDA graphs (asked); None: graphs, as vLLM's default
    cuda_graph_bytes: int | None = (
        None  # the graph estimate (taken out of the pool from v0.20.0, V1 runner); GPU plans
    )
    enable_expert_parallel: bool | None = None  # True: asked (carried for the step model; not priced yet)

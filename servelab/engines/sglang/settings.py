"""sglang's own knobs as `plan`/`predict` take them (`servelab plan MODEL --engine sglang -- --max-total-tokens N`), and
the figures its planner hands its scheduler and saves (the contract: servelab/sizing/typed.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from servelab.errors import ConfigError
from servelab.ranges import number
from servelab.sizing.typed import MAX_CONTEXT, MAX_PARALLEL, Figures, SpeculativeWords, check_whole, setting

BACKEND_WORD = re.compile(r"[a-z0-9][a-z0-9_.-]{0,39}")  # sglang's backend names: aiter, fa3, flashinfer, …
MAX_GPUS = 64  # servelab.plan.make.MAX_GPUS
MAX_SPECULATIVE_TOKENS = 16  # servelab.sizing.fit.MAX_SPECULATIVE_TOKENS
# --speculative-algorithm's choices (server_args.py) in servelab's terms: NEXTN is the model's own MTP layers
SPECULATIVE_ALGORITHMS = {
    "EAGLE": "eagle",
    "EAGLE3": "eagle",
    "NEXTN": "mtp",
    "NGRAM": "ngram",
    "STANDALONE": "draft",
}


@dataclass(frozen=True, kw_only=True)
class SglangSettings:
    """sglang's flags the planner prices; None: not given (sglang's default)."""

    mem_fraction_static: float | None = setting(
        "--mem-fraction-static", "share of the GPU for weights and the KV pool (default: by card size)"
    )
    max_total_tokens: int | None = setting("--max-total-tokens", "the KV pool in tokens")
    max_mamba_cache_size: int | None = setting("--max-mamba-cache-size", "linear-attention state slots")
    attention_backend: str | None = setting(
        "--attention-backend", "the attention kernels (aiter, triton, fa3 …; default: sglang's for the model)"
    )
    chunked_prefill_size: int | None = setting(
        "--chunked-prefill-size", "prompt tokens one step prefills (default: by card size; priced)"
    )
    ep_size: int | None = setting("--ep-size", "expert-parallel group size (carried; not priced yet)")
    disable_cuda_graph: bool = setting(
        "--disable-cuda-graph", "no CUDA graphs (carried; the eager step cost is not priced yet)", False
    )
    disable_radix_cache: bool = setting(
        "--disable-radix-cache",
        "no prefix cache: a hybrid's state pool is --parallel slots and each running request takes one",
        False,
    )
    speculative_algorithm: str | None = setting(
        "--speculative-algorithm", "EAGLE, EAGLE3, NEXTN (the model's MTP), NGRAM or STANDALONE"
    )
    speculative_num_steps: int | None = setting(
        "--speculative-num-steps", "draft steps per verify (tokens drafted)"
    )
    speculative_eagle_topk: int | None = setting(
        "--speculative-eagle-topk", "branches per draft step (carried; a tree above 1 is not priced yet)"
    )
    speculative_num_draft_tokens: int | None = setting(
        "--speculative-num-draft-tokens", "tokens one verify checks (steps + 1 for a chain)"
    )
    speculative_draft_model_path: str | None = setting(
        "--speculative-draft-model-path", "the draft (EAGLE head or STANDALONE model)"
    )

    def __post_init__(self) -> None:
        if self.mem_fraction_static is not None:
            number(self.mem_fraction_static, "--mem-fraction-static", 0, 1, above=True)
        for flag, value, most, unit in (
            ("--max-total-tokens", self.max_total_tokens, MAX_CONTEXT, "tokens"),
            ("--max-mamba-cache-size", self.max_mamba_cache_size, MAX_PARALLEL, "state slots"),
        ):
            if isinstance(value, int) and value < 1:
                raise ConfigError(f"sglang {flag} must be at least 1, got {value}")
            check_whole(value, flag, 1, most, unit)
        backend = self.attention_backend
        if backend is not None and not (isinstance(backend, str) and BACKEND_WORD.fullmatch(backend)):
            raise ConfigError(
                f"sglang --attention-backend {backend!r}: give one backend name (aiter, triton, fa3 …)"
            )
        if self.chunked_prefill_size is not None and self.chunked_prefill_size < 1:
            raise ConfigError(
                f"sglang --chunked-prefill-size {self.chunked_prefill_size}: servelab prices a chunk of at least"
                " 1 token (-1, no chunking, is not modelled)"
            )
        check_whole(self.chunked_prefill_size, "--chunked-prefill-size", 1, MAX_CONTEXT, "tokens")
        check_whole(self.ep_size, "--ep-size", 1, MAX_GPUS, "GPUs")
        for flag, switch in (
            ("--disable-cuda-graph", self.disable_cuda_graph),
            ("--disable-radix-cache", self.disable_radix_cache),
        ):
            if not isinstance(switch, bool):
                raise ConfigError(f"{flag} is a switch, got {switch!r}")
        check_whole(self.speculative_num_steps, "--speculative-num-steps", 1, MAX_SPECULATIVE_TOKENS, "steps")
        check_whole(self.speculative_eagle_topk, "--speculative-eagle-topk", 1, MAX_PARALLEL, "branches")
        check_whole(
            self.speculative_num_draft_tokens, "--speculative-num-draft-tokens", 2, MAX_PARALLEL, "tokens"
        )
        speculative_words(self)  # one line naming the flag when the speculative flags do not make a plan


def speculative_words(settings: SglangSettings) -> SpeculativeWords | None:
    """The --speculative-* flags in servelab's terms (None: no --speculative-algorithm); the tokens drafted per step
    are --speculative-num-steps (a chain), else --speculative-num-draft-tokens - 1."""
    s = settings
    numbers = (s.speculative_num_steps, s.speculative_eagle_topk, s.speculative_num_draft_tokens)
    if s.speculative_algorithm is None:
        if any(n is not None for n in numbers) or s.speculative_draft_model_path is not None:
            raise ConfigError("sglang --speculative-* flags need --speculative-algorithm (EAGLE, NEXTN, …)")
        return None
    method = SPECULATIVE_ALGORITHMS.get(s.speculative_algorithm.upper())
    if method is None:
        raise ConfigError(
            f"sglang --speculative-algorithm {s.speculative_algorithm!r}: choose one of"
            f" {', '.join(SPECULATIVE_ALGORITHMS)}"
        )
    drafted = s.speculative_num_steps or (s.speculative_num_draft_tokens or 0) - 1
    if not 1 <= drafted <= MAX_SPECULATIVE_TOKENS:
        raise ConfigError(
            f"sglang --speculative-algorithm {s.speculative_algorithm}: give --speculative-num-steps N (1 to"
            f" {MAX_SPECULATIVE_TOKENS}) or --speculative-num-draft-tokens N+1: the tokens drafted per step"
        )
    if method in ("eagle", "draft") and not s.speculative_draft_model_path:
        raise ConfigError(
            f"sglang --speculative-algorithm {s.speculative_algorithm} needs --speculative-draft-model-path"
        )
    return SpeculativeWords(method, drafted, s.speculative_draft_model_path or "")


@dataclass(frozen=True, kw_only=True)
class SglangFigures(Figures):
    """What the plan found (sglang's own names); the scheduler reads the pool, the running cap, the chunk and the
    state slots."""

    mem_fraction_static: float
    max_total_tokens: int
    max_req_len: int
    max_running_requests: int
    chunked_prefill_size: int
    cuda_graph_max_bs: int
    mamba_cache_size: int
    kv_cell_bytes: int
    mamba_state_bytes_per_request: int
    ep_size: int | None = None  # asked (carried for the step model; not priced yet)
    disable_cuda_graph: bool | None = None  # True: asked (carried; not priced yet)

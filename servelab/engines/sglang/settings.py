"""sglang's own knobs as `plan`/`predict` take them (`servelab plan MODEL --engine sglang -- --max-total-tokens N`), and
the figures its planner hands its scheduler and saves (the contract: servelab/engines/typed.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from servelab.engines.typed import MAX_CONTEXT, MAX_PARALLEL, Figures, setting, whole
from servelab.errors import ConfigError
from servelab.ranges import number

BACKEND_WORD = re.compile(r"[a-z0-9][a-z0-9_.-]{0,39}")  # sglang's backend names: aiter, fa3, flashinfer, …


@dataclass(frozen=True)
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

    def __post_init__(self) -> None:
        if self.mem_fraction_static is not None:
            number(self.mem_fraction_static, "--mem-fraction-static", 0, 1, above=True)
        for flag, value, most, unit in (
            ("--max-total-tokens", self.max_total_tokens, MAX_CONTEXT, "tokens"),
            ("--max-mamba-cache-size", self.max_mamba_cache_size, MAX_PARALLEL, "state slots"),
        ):
            if isinstance(value, int) and value < 1:
                raise ConfigError(f"sglang {flag} must be at least 1, got {value}")
            whole(value, flag, 1, most, unit)
        backend = self.attention_backend
        if backend is not None and not (isinstance(backend, str) and BACKEND_WORD.fullmatch(backend)):
            raise ConfigError(
                f"sglang --attention-backend {backend!r}: give one backend name (aiter, triton, fa3 …)"
            )


@dataclass(frozen=True)
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

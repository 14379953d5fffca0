"""vLLM V1's scheduler, for the emulator (servelab/scheduling/continuous.py runs it).

From the plan's figures (`VllmFigures`, servelab/engines/vllm/planner.py and cpu_planner.py): the KV pool of `num_blocks` blocks of
`block_size` tokens, `max_num_seqs` running, `max_num_batched_tokens` a step. V1 mixes chunked prefill with
decode in one step (running requests first, then waiting ones, within the token budget), preempts the request
admitted last when the pool runs out and recomputes it (docs: https://docs.vllm.ai/en/latest/configuration/
optimization.html "Preemption", "Chunked Prefill"). Prefix caching is on by default; for hybrid (Mamba-style)
models it is left off, as vLLM did by default, and each request's recurrent state takes one block of the pool
(the hybrid allocator sizes attention pages to the state: `mamba_blocks` in the plan). A step's prompt blocks are
hashed as it is scheduled (`KVCacheManager.allocate_slots` -> `cache_blocks`, before the forward; the KV a step
writes is in place before its attention reads it), so a request admitted after another in the same step reuses
the blocks the other is computing.
"""

from __future__ import annotations

from servelab.engines.vllm.settings import VllmFigures
from servelab.scheduling.continuous import ContinuousBatching, ContinuousSettings
from servelab.scheduling.core import EngineSetup

DEFAULT_MAX_NUM_SEQS = 256
DEFAULT_MAX_NUM_BATCHED_TOKENS = 2048
DEFAULT_BLOCK_SIZE = 16


def scheduler(setup: EngineSetup[VllmFigures]) -> ContinuousBatching:
    f = setup.figures
    block = _int(f.block_size, DEFAULT_BLOCK_SIZE)
    kv_tokens = _int(f.kv_tokens, setup.context * max(1, setup.slots))
    hybrid = setup.hybrid or f.mamba_blocks > 0
    return ContinuousBatching(
        ContinuousSettings(
            max_running=_int(f.max_num_seqs, DEFAULT_MAX_NUM_SEQS),
            token_budget=_int(f.max_num_batched_tokens or 0, DEFAULT_MAX_NUM_BATCHED_TOKENS),
            block_tokens=block,
            total_blocks=_int(f.num_blocks, max(1, kv_tokens // block)),
            state_blocks=1 if hybrid else 0,
            mixed=True,
            prefix_caching=not hybrid,
            cache_on_schedule=True,
            speculation=setup.speculation,
        )
    )


def _int(value: int, default: int) -> int:
    """A figure the plan may leave at 0 or out (the CPU plan's step budget: vLLM's default applies)."""
    return value if value > 0 else default

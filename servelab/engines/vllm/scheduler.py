"""vLLM V1's scheduler, for the emulator (servelab/predict/continuous.py runs it).

From the plan's figures (`Plan.details`, servelab/engines/vllm/planner.py): the KV pool of `num_blocks` blocks of
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

from servelab.predict.continuous import ContinuousBatching, ContinuousSettings
from servelab.predict.core import EngineSetup

DEFAULT_MAX_NUM_SEQS = 256
DEFAULT_MAX_NUM_BATCHED_TOKENS = 2048
DEFAULT_BLOCK_SIZE = 16


def scheduler(setup: EngineSetup) -> ContinuousBatching:
    d = setup.details
    block = _int(d.get("block_size"), DEFAULT_BLOCK_SIZE)
    kv_tokens = _int(d.get("kv_tokens"), setup.context * max(1, setup.slots))
    hybrid = setup.hybrid or _int(d.get("mamba_blocks"), 0) > 0
    return ContinuousBatching(
        ContinuousSettings(
            max_running=_int(d.get("max_num_seqs"), DEFAULT_MAX_NUM_SEQS),
            token_budget=_int(d.get("max_num_batched_tokens"), DEFAULT_MAX_NUM_BATCHED_TOKENS),
            block_tokens=block,
            total_blocks=_int(d.get("num_blocks"), max(1, kv_tokens // block)),
            state_blocks=1 if hybrid else 0,
            mixed=True,
            prefix_caching=not hybrid,
            cache_on_schedule=True,
            speculation=setup.speculation,
        )
    )


def _int(value: object, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else default

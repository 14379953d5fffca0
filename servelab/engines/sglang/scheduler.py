"""sglang's scheduler, for the emulator (servelab/scheduling/continuous.py runs it).

From the plan's figures (`SglangFigures`, servelab/engines/sglang/planner.py): a token pool of `max_total_tokens`
(page size 1), `max_running_requests`, prefill chunks of `chunked_prefill_size`, and for hybrid models
`mamba_cache_size` recurrent states, which cap the running requests. Without --enable-mixed-chunk (the
default) a step either prefills (new or chunked requests, while there are any that fit) or decodes every
running request; the radix cache reuses any shared prefix token by token (left off for hybrid models here),
which the emulator keeps in RADIX_UNIT-token blocks: a sequence's KV is rounded up, a cache hit down, to a whole
unit (fewer than 16 tokens either way, against pools of 10^5 tokens and more), so a step costs per 16 tokens,
not per token.
A waiting request is admitted only when the pool holds its whole prompt and its output (clipped to
CLIP_MAX_NEW_TOKENS) besides the outputs the running requests are owed, times the new-token ratio
(`PrefillAdder.add_one_req`, `rem_total_tokens`; the ratio's start, floor and decay from the scheduler's
`init_new_token_ratio`): `OUTPUT_RESERVE`.
When decode runs out of tokens, requests are retracted and computed again (`retract_decode`). Sources:
https://docs.sglang.ai/advanced_features/server_arguments.html, docs/reference/memory.md §2,
docs/reference/sglang-scheduler.md §1.
"""

from __future__ import annotations

from servelab.engines.sglang.settings import SglangFigures
from servelab.scheduling.continuous import ContinuousBatching, ContinuousSettings, OutputReserve
from servelab.scheduling.core import EngineSetup

DEFAULT_CHUNKED_PREFILL = 4096  # the planner's prefill_chunk_tokens (servelab/engines/sglang/engine.py)
DEFAULT_MAX_RUNNING = 4096
RADIX_UNIT = 16  # tokens per emulated block of sglang's page-size-1 pool (the docstring above)
# schedule_policy.py CLIP_MAX_NEW_TOKENS (SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION, 4096); the new-token ratio from
# SGLANG_INIT_NEW_TOKEN_RATIO 0.7 x --schedule-conservativeness 1.0, floored at 0.14 of it
# (SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR), reached in SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS 600 decode steps
OUTPUT_RESERVE = OutputReserve(clip_tokens=4096, initial_ratio=0.7, least_ratio=0.7 * 0.14, decay_steps=600)


def scheduler(setup: EngineSetup[SglangFigures]) -> ContinuousBatching:
    f = setup.figures
    states = _int(f.mamba_cache_size, 0)
    hybrid = setup.hybrid or states > 0
    return ContinuousBatching(
        ContinuousSettings(
            max_running=_int(f.max_running_requests, DEFAULT_MAX_RUNNING),
            token_budget=_int(f.chunked_prefill_size, DEFAULT_CHUNKED_PREFILL),
            block_tokens=RADIX_UNIT,
            total_blocks=_int(f.max_total_tokens, setup.context * max(1, setup.slots)) // RADIX_UNIT,
            state_slots=states or None,
            mixed=False,
            prefix_caching=not hybrid,
            speculation=setup.speculation,
            reserve=OUTPUT_RESERVE,
        )
    )


def _int(value: int, default: int) -> int:
    """A figure the plan may leave at 0 (none sized: sglang's own default applies)."""
    return value if value > 0 else default

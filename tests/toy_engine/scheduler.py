"""The toy server's scheduler for `servelab predict`: continuous batching, `step_tokens` a step."""

from __future__ import annotations

from servelab.scheduling.continuous import ContinuousBatching, ContinuousSettings
from servelab.scheduling.core import EngineSetup
from tests.toy_engine.settings import ToyFigures


def scheduler(setup: EngineSetup[ToyFigures]) -> ContinuousBatching:
    f = setup.figures
    return ContinuousBatching(
        ContinuousSettings(
            max_running=f.slots,
            token_budget=f.step_tokens,
            block_tokens=16,
            total_blocks=f.context * f.slots // 16,
        )
    )

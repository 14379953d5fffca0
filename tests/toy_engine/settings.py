"""The toy engine's own knob and figures (the contract: servelab/sizing/typed.py): `--step-tokens N`, the tokens one
toy step computes, which the plan emits, verify checks and predict's toy scheduler spends."""

from __future__ import annotations

from dataclasses import dataclass

from servelab.sizing.typed import Figures, check_whole, setting

DEFAULT_STEP_TOKENS = 256


@dataclass(frozen=True)
class ToySettings:
    step_tokens: int | None = setting("--step-tokens", "tokens one toy step computes (default 256)")

    def __post_init__(self) -> None:
        check_whole(self.step_tokens, "--step-tokens", 1, 4096, "tokens")


@dataclass(frozen=True)
class ToyFigures(Figures):
    slots: int
    context: int
    step_tokens: int


@dataclass(frozen=True)
class ToyReported:
    """What only a toy server reports: its step budget (its model card's `@step=N`)."""

    step_tokens: int | None = None

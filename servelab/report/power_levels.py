"""Serving power per benchmark level, from a run's stored "gpu_power" samples. Pure.

The bench labels each sample with the `target_index`, `level` and `repeat` it was taken in, so the bound can
hold the single-stream (c=1) level's power against the bandwidth measured at that same level, and each level
gets its energy per output token. Samples of older runs carry no labels: their power spans all levels.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from servelab.diagnose.power import mean_power_w
from servelab.report.data import EngineSummary, as_number
from servelab.report.levels import LevelFigures


@dataclass(frozen=True)
class LevelPower:
    """One level of one target: the serving GPUs' draw and the energy per output token."""

    level: str
    samples: int  # power readings the mean is of
    gpus: int  # serving GPUs the readings are from
    mean_power_w: float  # mean draw per serving GPU
    total_power_w: float  # summed over the serving GPUs (each GPU's mean)
    output_tok_s: float  # the level's aggregate output throughput

    @property
    def joules_per_token(self) -> float | None:
        return self.total_power_w / self.output_tok_s if self.output_tok_s > 0 else None


@dataclass(frozen=True)
class ServingPower:
    """The samples the bound's serving power is the mean of, and where they come from."""

    rows: tuple[dict, ...]
    level: (
        str | None
    )  # the level of those samples; None: all levels (unlabelled, or no single-stream samples)
    labelled: bool  # the samples say their target and level (runs stored before that do not)
    levels: tuple[LevelPower, ...]  # per level of the target, where labelled samples exist


def serving_rows(rows: Sequence[dict]) -> list[dict]:
    """The samples of GPUs that did work (SM utilisation above 0 at some point); all rows if none says."""
    busy = {r.get("gpu") for r in rows if (as_number(r.get("sm_util_pct")) or 0) > 0}
    return [r for r in rows if r.get("gpu") in busy] if busy else list(rows)


def is_labelled(rows: Sequence[dict]) -> bool:
    """Whether every sample says the level it was taken in (samples since the bench labels them)."""
    return bool(rows) and all(isinstance(r.get("level"), str) for r in rows)


def readings(rows: Sequence[dict]) -> int:
    return sum(1 for r in rows if as_number(r.get("power_w")) is not None)


def _of_level(rows: Sequence[dict], level: str) -> list[dict]:
    return [r for r in rows if r.get("level") == level]


def level_power(figures: LevelFigures, rows: Sequence[dict]) -> LevelPower | None:
    """The level's power and energy per token from the target's serving samples; None without readings."""
    mine = _of_level(rows, figures.label)
    mean = mean_power_w(mine)
    if mean is None:
        return None
    gpus = sorted({r.get("gpu") for r in mine if as_number(r.get("power_w")) is not None}, key=str)
    total = sum(mean_power_w(mine, gpu) or 0.0 for gpu in gpus)
    return LevelPower(figures.label, readings(mine), len(gpus), mean, total, figures.aggregate_tok_s)


def serving_power(engine: EngineSummary, run_rows: Sequence[dict]) -> ServingPower:
    """The engine's serving samples: its single-stream level's when the samples say their level, else all."""
    if not is_labelled(run_rows):
        return ServingPower(tuple(serving_rows(run_rows)), None, False, ())
    mine = serving_rows([r for r in run_rows if r.get("target_index") == engine.target_index])
    levels = tuple(p for lv in engine.levels if (p := level_power(lv, mine)) is not None)
    single = engine.single_stream
    at = single.label if single is not None and readings(_of_level(mine, single.label)) else None
    return ServingPower(tuple(_of_level(mine, at) if at else mine), at, True, levels)

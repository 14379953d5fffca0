"""`plan` and `predict` build their `PlanningInputs` from their options by name (cli/planning.py `inputs`): an option
renamed away from its field would silently leave the field at its default, so the names are held here."""

from __future__ import annotations

import dataclasses

import typer

from servelab.cli.app import build_app
from servelab.cli.planning import PlanningInputs, inputs

FROM_ELSEWHERE = {"model", "words"}  # MODEL and the words after -- come from split_model
PLAN_ONLY = {"host"}  # predict's emulated engine binds nothing


def _options(command: str) -> set[str]:
    group = typer.main.get_command(build_app())
    assert isinstance(group, typer.core.TyperGroup)
    return {p.name for p in group.commands[command].params if p.name is not None}


def test_plan_and_predict_name_an_option_after_every_planning_field() -> None:
    fields = {f.name for f in dataclasses.fields(PlanningInputs)} - FROM_ELSEWHERE
    assert fields - _options("plan") == set()
    assert fields - _options("predict") == PLAN_ONLY


def test_inputs_takes_the_options_by_name_and_model_and_words_as_split() -> None:
    command = typer.main.get_command(build_app())
    ctx = typer.Context(command)
    ctx.params = {
        "model": "ignored",
        "engine": "vllm",
        "parallel": 4,
        "kv_dtype": "fp8",
        "name": "not a field",
    }
    asked = inputs(ctx, "Qwen/Qwen3-8B", ["--max-num-seqs", "8"])
    assert asked == PlanningInputs(
        model="Qwen/Qwen3-8B", engine="vllm", parallel=4, kv_dtype="fp8", words=("--max-num-seqs", "8")
    )

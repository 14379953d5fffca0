"""``toy-server MODEL --ctx N [--slots N]`` taken apart, and written."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from servelab.errors import ConfigError
from tests.toy_engine.settings import ToySettings

LAUNCH_FORMS = ("toy-server …",)
IMAGE_WORDS = ("toyserve",)


@dataclass(frozen=True)
class ToyLaunch:
    model: str | None = None
    ctx: int | None = None
    slots: int | None = None
    step_tokens: int | None = None


def recognises(argv: list[str]) -> bool:
    return bool(argv) and argv[0].rsplit("/", 1)[-1] == "toy-server"


def parse(argv: list[str], environment: dict[str, str] | None = None) -> ToyLaunch:
    words = argv[1:]
    value = {w: words[i + 1] for i, w in enumerate(words[:-1]) if w.startswith("--")}
    model = next(
        (
            w
            for i, w in enumerate(words)
            if not w.startswith("-") and (i == 0 or not words[i - 1].startswith("--"))
        ),
        None,
    )
    return ToyLaunch(
        model,
        int(value["--ctx"]) if "--ctx" in value else None,
        int(value["--slots"]) if "--slots" in value else None,
        int(value["--step-tokens"]) if "--step-tokens" in value else None,
    )


def settings(argv: list[str], environment: dict[str, str] | None = None) -> ToySettings:
    """The words after `servelab plan … --`: only --step-tokens N."""
    if len(argv) not in (0, 2) or (argv and argv[0] != "--step-tokens"):
        raise ConfigError(f"toy-server takes --step-tokens N after --, not {' '.join(argv)!r}")
    return ToySettings(step_tokens=int(argv[1]) if argv else None)


def expectations(launch: ToyLaunch) -> dict[str, Any]:
    pairs = (("context", launch.ctx), ("slots", launch.slots), ("step_tokens", launch.step_tokens))
    return {k: v for k, v in pairs if v is not None}


def command(model: str, *, ctx: int, host: str, port: int, step_tokens: int | None = None) -> list[str]:
    step = [] if step_tokens is None else ["--step-tokens", str(step_tokens)]
    return ["toy-server", model, "--ctx", str(ctx), *step, "--host", host, "--port", str(port)]

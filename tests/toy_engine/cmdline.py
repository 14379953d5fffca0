"""``toy-server MODEL --ctx N [--slots N]`` taken apart, and written."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

LAUNCH_FORMS = ("toy-server …",)
IMAGE_WORDS = ("toyserve",)


@dataclass(frozen=True)
class ToyLaunch:
    model: str | None = None
    ctx: int | None = None
    slots: int | None = None


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
    )


def expectations(launch: ToyLaunch) -> dict[str, Any]:
    return {k: v for k, v in (("context", launch.ctx), ("slots", launch.slots)) if v is not None}


def command(model: str, *, ctx: int, host: str, port: int) -> list[str]:
    return ["toy-server", model, "--ctx", str(ctx), "--host", host, "--port", str(port)]

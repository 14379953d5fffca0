"""`plan --cmd "…"` / `plan --compose FILE [--service S]`: the launch someone already runs, as plan settings.

The words are read exactly as `verify` reads them (verify/command.py: `VAR=value`, `docker run … IMAGE`, the
engine's own `cmdline.parse`; verify/compose.py: the service, its environment and bind mounts); the engine's
`Planner.launch_settings` turns its parsed launch into `LaunchSettings`. A compose model path is followed back
through the service's volumes to the host, so the file the container would load is the one planned. An image tag
that names a release (`vllm/vllm-openai:v0.10.1`, the engine's `Planner.image_version`) plans that release's rules.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from servelab.engines import registry
from servelab.engines.base import LaunchSettings
from servelab.errors import ConfigError
from servelab.sizing.types import Plan
from servelab.verify.command import read_command
from servelab.verify.compose import load_service


@dataclass(frozen=True)
class PlannedLaunch:
    """A launch to plan: its engine, what it asks for, and its model as this machine can read it."""

    engine: str
    source: str  # "--cmd" or "compose FILE service S", for messages
    settings: LaunchSettings
    model: str | None  # the host path of a compose-mounted file, else the launch's own model word
    image: str | None = None  # the container image that runs it
    image_version: str | None = None  # the release its tag names (None: untagged, latest, no container)

    def plan_options(self) -> dict[str, Any]:
        """make_plan's keyword arguments the launch decides (those it leaves out keep the CLI's values)."""
        s = self.settings
        options: dict[str, Any] = {} if s.engine is None else {"settings": s.engine}
        for key, value in (
            ("context", s.context),
            ("parallel", s.parallel),
            ("kv_dtype", s.kv_dtype),
            ("gpus", s.tp),
            ("engine_version", self.image_version),
        ):
            if value is not None:
                options[key] = value
        return options

    def annotate(self, plan: Plan) -> Plan:
        """The plan with the launch's notes first among its warnings."""
        notes = self.settings.notes
        if self.image_version is not None:
            label = registry.get_engine(self.engine).label
            notes = (
                *notes,
                f"planned with {label} {self.image_version}'s rules, the release of {self.image}",
            )
        return dataclasses.replace(plan, warnings=(*notes, *plan.warnings))

    def check_version(self, asked: str | None) -> None:
        """--engine-version must not name another release than the launch's image does."""
        if asked is not None and self.image_version is not None and asked != self.image_version:
            raise ConfigError(
                f"--engine-version {asked}, but {self.source} runs {self.image} (release {self.image_version}):"
                " drop --engine-version or plan another launch"
            )


def read_launch(
    *,
    cmd: str | None = None,
    compose: Path | None = None,
    service: str | None = None,
    engine: str | None = None,
) -> PlannedLaunch:
    """The launch in `cmd` or in `compose`'s service; `engine` names it when the words are bare flags."""
    if service is not None and compose is None:
        raise ConfigError("--service names a service of --compose FILE; give --compose too")
    if (cmd is None) == (compose is None):
        raise ConfigError('give one of --cmd "…" or --compose FILE, not both')
    mounted = None if compose is None else load_service(compose, service)
    if mounted is None:
        source, command = "--cmd", read_command(cmd or "", source="--cmd")
    else:
        source = f"--compose {compose} service {mounted.name!r}"
        if not mounted.argv:
            raise ConfigError(f"{source} has no command: or entrypoint: to plan")
        command = read_command(list(mounted.argv), source=source, image=mounted.image)
        command = dataclasses.replace(command, environment={**mounted.environment, **command.environment})
    name = _engine(command.engine, engine, source)
    chosen_engine = registry.get_engine(name)
    planner, reader = chosen_engine.planner, chosen_engine.cmdline
    if planner is None or planner.launch_settings is None or reader is None:
        planned = ", ".join(e.label for e in registry.planned())
        raise ConfigError(
            f"{source}: {chosen_engine.label} launches are not planned; servelab plans {planned}"
        )
    settings = planner.launch_settings(reader.parse(list(command.argv), dict(command.environment)))
    model = settings.model
    if mounted is not None and compose is not None and model:
        host = mounted.host_path(model, compose.parent)
        model = str(host) if host is not None else model
    image = command.image
    version = planner.image_version(image) if image and planner.image_version else None
    return PlannedLaunch(chosen_engine.name, source, settings, model, image, version)


def _engine(found: str | None, asked: str | None, source: str) -> str:
    if found is None and asked is None:
        raise ConfigError(f"{source} gives bare flags: name the engine that runs them with --engine")
    if found is not None and asked is not None and registry.get_engine(asked).name != found:
        raise ConfigError(f"{source} launches {found}, not {asked}: drop --engine or plan another launch")
    return found or str(asked)

"""Reading a docker-compose service's engine command: ``command:`` as a list or a string, ``image`` as hint.

The field report's service ran a llama.cpp fork built from a Dockerfile (``build:``, no image) whose
``command:`` was a list of flags (``-ngl 99 -c 262144 -fa on -np 4 …``); the entrypoint was llama-server.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from servelab.errors import ConfigError
from servelab.userfiles import UserFile
from servelab.verify.asked import Asked, from_engine_command
from servelab.verify.command import engine_of_command, image_engine, read_command

MAX_COMPOSE_BYTES = 1 << 20  # a docker-compose file: a few services


@dataclass(frozen=True)
class ComposeService:
    """One service: its name, image (may be None when built locally), full argv and bind mounts."""

    name: str
    image: str | None
    argv: tuple[str, ...]
    environment: dict[str, str] = field(default_factory=dict)
    volumes: tuple[tuple[str, str], ...] = ()  # (host path as written, container path) of each bind mount

    def host_path(self, inside: str, compose_dir: Path) -> Path | None:
        """Where a path inside the container lies on the host (relative host paths from the compose file's
        directory, ``${VAR}`` expanded), through the deepest mount that holds it; None when none does."""
        target = PurePosixPath(inside)
        holding = [
            (host, PurePosixPath(mount)) for host, mount in self.volumes if target.is_relative_to(mount)
        ]
        if not target.is_absolute() or not holding:
            return None
        host, mount = max(holding, key=lambda pair: len(pair[1].parts))
        return (compose_dir / os.path.expandvars(host)).joinpath(*target.relative_to(mount).parts)

    @property
    def engine_hint(self) -> str | None:
        """The engine named by the program words, else by the image name."""
        return engine_of_command(list(self.argv)) or image_engine(self.image)


def load_service(path: Path, service: str | None = None) -> ComposeService:
    """The named service, or the only one, or the one whose command or image names an engine, or else the
    only one with a command (a locally built engine running bare flags beside, say, a web server)."""
    services = _services(path)
    if service is not None:
        if service not in services:
            raise ConfigError(f"--compose {path}: no service {service!r}; services: {', '.join(services)}")
        return _service(service, services[service])
    parsed = [_service(name, body) for name, body in services.items()]
    if len(parsed) == 1:
        return parsed[0]
    engines = [s for s in parsed if s.engine_hint and s.argv] or [s for s in parsed if s.argv]
    if len(engines) != 1:
        raise ConfigError(
            f"--compose {path}: several services ({', '.join(services)}); name one with --service"
        )
    return engines[0]


def from_compose(path: Path, service: str | None = None, *, engine: str | None = None) -> Asked:
    """Asked from a compose service; ``engine`` (e.g. the detected one) is used for a command of bare flags."""
    chosen = load_service(path, service)
    if not chosen.argv:
        raise ConfigError(f"--compose {path}: service {chosen.name!r} has no command: to read flags from")
    source = f"compose {chosen.name}"
    command = read_command(list(chosen.argv), source=source, image=chosen.image)
    return from_engine_command(command, engine=engine, source=source, environment=chosen.environment)


def _service(name: str, body: Any) -> ComposeService:
    if not isinstance(body, dict):
        raise ConfigError(f"compose service {name!r} is not a mapping")
    argv = _words(body.get("entrypoint"), name) + _words(body.get("command"), name)
    image = body.get("image")
    return ComposeService(
        name,
        str(image) if image else None,
        tuple(argv),
        _environment(body.get("environment")),
        _bind_mounts(body.get("volumes")),
    )


def _bind_mounts(value: Any) -> tuple[tuple[str, str], ...]:
    """``volumes:`` bind mounts, short (``./models:/models:ro``) or long (``type: bind``) syntax; named
    volumes (no path on the host) are left out."""
    mounts = []
    for item in value if isinstance(value, list) else []:
        if isinstance(item, str):
            host, _, rest = item.partition(":")
            inside = rest.split(":")[0]
        elif isinstance(item, dict) and item.get("type", "bind") == "bind":
            host, inside = str(item.get("source", "")), str(item.get("target", ""))
        else:
            continue
        if inside.startswith("/") and host.startswith(("/", ".", "~", "$")):
            mounts.append((os.path.expanduser(host) if host.startswith("~") else host, inside))
    return tuple(mounts)


def _environment(value: Any) -> dict[str, str]:
    """``environment:`` as a mapping or a list of KEY=VALUE strings."""
    if isinstance(value, dict):
        return {str(k): _word(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return dict(str(item).partition("=")[::2] for item in value if "=" in str(item))
    return {}


def _words(value: Any, name: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        try:
            return shlex.split(value)
        except ValueError as exc:  # an unclosed quote
            raise ConfigError(f"compose service {name!r}: cannot split its command ({exc})") from exc
    if isinstance(value, list):
        return [_word(item) for item in value]
    raise ConfigError(f"compose service {name!r}: command must be a list or a string")


def _word(item: Any) -> str:
    """A list item as a word; YAML 1.1 reads a bare ``on``/``off`` as a bool."""
    if isinstance(item, bool):
        return "on" if item else "off"
    return str(item)


def _services(path: Path) -> dict[str, Any]:
    document = UserFile.named(path, "--compose", "give a docker-compose file").load_yaml(MAX_COMPOSE_BYTES)
    services = document.get("services") if isinstance(document, dict) else None
    if not isinstance(services, dict) or not services:
        raise ConfigError(f"--compose {path}: no services: section")
    return services

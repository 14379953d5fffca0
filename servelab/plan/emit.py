"""Render a plan's launch argv as a shell line or a docker-compose service with a health check.

The flags come from each engine's cmdline module (its writer); this file only formats. Servers bind 127.0.0.1 unless the user
asks for another host; in compose the server listens on 0.0.0.0 inside the container and the port is published
on the asked host only.
"""

from __future__ import annotations

import shlex
from pathlib import PurePosixPath

import yaml

from servelab.errors import ConfigError

EMIT_FORMATS = ("cmd", "compose")


def shell_line(argv: list[str] | tuple[str, ...]) -> str:
    return shlex.join(argv)


def _container_argv(argv: list[str], mounts: dict[str, str]) -> list[str]:
    """The argv inside the container: listening on all its interfaces, host files at their mounted paths."""
    out = [_in_container(word, mounts) for word in argv]
    for i, word in enumerate(out[:-1]):
        if word == "--host":
            out[i + 1] = "0.0.0.0"
    return out


def _host_dirs(argv: list[str]) -> dict[str, str]:
    """Directory of each absolute file path in argv (a GGUF, a draft model) → where the container sees it."""
    dirs = list(
        dict.fromkeys(str(PurePosixPath(w).parent) for w in argv[1:] if w.startswith("/") and w != "/")
    )
    return {d: "/models" if len(dirs) == 1 else f"/models/{i}" for i, d in enumerate(dirs)}


def _in_container(word: str, mounts: dict[str, str]) -> str:
    path = PurePosixPath(word)
    return (
        f"{mounts[str(path.parent)]}/{path.name}"
        if word.startswith("/") and str(path.parent) in mounts
        else word
    )


def compose_service(
    name: str,
    argv: list[str],
    *,
    image: str,
    port: int,
    health_path: str,
    host: str = "127.0.0.1",
    gpus: int = 1,
) -> str:
    """A docker-compose file with one service that runs `argv`, publishes `port` on `host`, checks health."""
    url = f"http://localhost:{port}{health_path}"
    mounts = _host_dirs(argv)
    models = [f"{d}:{inside}:ro" for d, inside in mounts.items()] or ["./models:/models"]
    service = {
        "image": image,
        "entrypoint": _container_argv(argv, mounts),
        "ports": [f"{host}:{port}:{port}"],
        "ipc": "host",
        "volumes": ["${HOME}/.cache/huggingface:/root/.cache/huggingface", *models],
        "healthcheck": {
            "test": ["CMD", "curl", "-fsS", url],
            "interval": "30s",
            "timeout": "5s",
            "retries": 5,
            "start_period": "600s",
        },
        "deploy": {
            "resources": {
                "reservations": {"devices": [{"driver": "nvidia", "count": gpus, "capabilities": ["gpu"]}]}
            }
        },
        "restart": "unless-stopped",
    }
    return yaml.safe_dump({"services": {name: service}}, sort_keys=False, width=1000)


def check_emit(emit: str | None) -> None:
    if emit is not None and emit not in EMIT_FORMATS:
        raise ConfigError(f"--emit {emit!r} is not a format; choose one of: {', '.join(EMIT_FORMATS)}")

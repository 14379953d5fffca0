"""Render a plan's launch argv as a shell line or a docker-compose service with a health check.

The flags come from each engine's cmdline module (its writer); this file only formats. Servers bind 127.0.0.1 unless the user
asks for another host; in compose the server listens on 0.0.0.0 inside the container and the port is published
on the asked host only.
"""

from __future__ import annotations

import shlex
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

import yaml

from servelab.errors import ConfigError

if TYPE_CHECKING:
    from servelab.engines.base import SourceBuild

EMIT_FORMATS = ("cmd", "compose", "dockerfile")
MODEL_SUFFIXES = (".gguf",)  # a relative word ending so is a model file on the host (the catalog placeholder)
# CUDA toolkit for the build: mainline's .devops/cuda.Dockerfile default; sm_103 / sm_121 need CUDA 12.9
# (docs/reference/llamacpp-fork.md)
CUDA_VERSION = "12.8.1"
CUDA_VERSION_BY_ARCH = {"10.3": "12.9.1", "12.1": "12.9.1"}
# what the field report's fork service needed (docs/reference/field-report.md §6, llamacpp-fork.md)
FORK_ULIMITS = {"memlock": {"soft": -1, "hard": -1}, "stack": 67108864}


def shell_line(argv: list[str] | tuple[str, ...]) -> str:
    return shlex.join(argv)


def _container_argv(argv: list[str], mounts: dict[str, str]) -> list[str]:
    """The argv inside the container: listening on all its interfaces, host files at their mounted paths."""
    out = [_in_container(word, mounts) for word in argv]
    for i, word in enumerate(out[:-1]):
        if word == "--host":
            out[i + 1] = "0.0.0.0"
    return out


def _is_host_file(word: str) -> bool:
    """An absolute path, or a relative model file (`models/X.gguf`): a host file the container must see."""
    return (word.startswith("/") and word != "/") or (
        not word.startswith("-") and "/" in word and word.lower().endswith(MODEL_SUFFIXES)
    )


def _host_dir(word: str) -> str:
    """The host directory holding a file word, as compose spells it (relative ones start with ./)."""
    parent = str(PurePosixPath(word).parent)
    return parent if parent.startswith(("/", ".")) else f"./{parent}"


def _host_dirs(argv: list[str]) -> dict[str, str]:
    """Directory of each host file in argv (a GGUF, a draft model) → where the container sees it."""
    dirs = list(dict.fromkeys(_host_dir(w) for w in argv[1:] if _is_host_file(w)))
    return {d: "/models" if len(dirs) == 1 else f"/models/{i}" for i, d in enumerate(dirs)}


def _in_container(word: str, mounts: dict[str, str]) -> str:
    if not _is_host_file(word) or _host_dir(word) not in mounts:
        return word
    return f"{mounts[_host_dir(word)]}/{PurePosixPath(word).name}"


def compose_service(
    name: str,
    argv: list[str],
    *,
    image: str,
    port: int,
    health_path: str,
    host: str = "127.0.0.1",
    gpus: int = 1,
    build: SourceBuild | None = None,
    compute_capability: str | None = None,
) -> str:
    """A docker-compose file with one service that runs `argv`, publishes `port` on `host`, checks health.
    With `build`, the image is built from the Dockerfile `dockerfile()` writes beside it (never `image`)."""
    url = f"http://localhost:{port}{health_path}"
    mounts = _host_dirs(argv)
    models = [f"{d}:{inside}:ro" for d, inside in mounts.items()] or ["./models:/models"]
    origin: dict[str, Any] = {"image": image}
    if build is not None:
        tag = f"{build.image}:sm{_arch(compute_capability)}"
        origin = {
            "build": {"context": ".", "dockerfile": "Dockerfile"},
            "image": tag,
            "ulimits": FORK_ULIMITS,
        }
    service = {
        **origin,
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


def _arch(compute_capability: str | None) -> str:
    """cmake's CUDA architecture for a compute capability: 8.9 → 89."""
    if not compute_capability:
        raise ConfigError("a source build needs the card's CUDA compute capability; plan it for a CUDA --gpu")
    return compute_capability.replace(".", "")


def dockerfile(build: SourceBuild, compute_capability: str | None, *, port: int, health_path: str) -> str:
    """A two-stage Dockerfile: `build` compiled with CUDA for one architecture, its binary on a runtime image."""
    arch = _arch(compute_capability)
    cuda = CUDA_VERSION_BY_ARCH.get(str(compute_capability), CUDA_VERSION)
    cmake = shlex.join(["cmake", "-B", "build", *build.cmake_flags, f"-DCMAKE_CUDA_ARCHITECTURES={arch}"])
    clone = shlex.join(["git", "clone", "--depth", "1", "--branch", build.ref, build.repo, "/src"])
    target = shlex.quote(build.target)
    return f"""\
# {build.label} ({build.repo}, {build.ref}) for sm_{arch}: written by `servelab plan --emit dockerfile`
ARG CUDA_VERSION={cuda}
FROM nvidia/cuda:${{CUDA_VERSION}}-devel-ubuntu24.04 AS build
RUN apt-get update && apt-get install -y --no-install-recommends build-essential cmake git ca-certificates \\
    && rm -rf /var/lib/apt/lists/*
RUN {clone}
WORKDIR /src
RUN {cmake} && cmake --build build --config Release -j"$(nproc)" --target {target}

FROM nvidia/cuda:${{CUDA_VERSION}}-runtime-ubuntu24.04
RUN apt-get update && apt-get install -y --no-install-recommends libgomp1 curl && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/build/bin/{target} /usr/local/bin/{target}
EXPOSE {port}
HEALTHCHECK CMD ["curl", "-fsS", "http://localhost:{port}{health_path}"]
ENTRYPOINT ["/usr/local/bin/{target}"]
"""


def check_emit(emit: str | None) -> None:
    if emit is not None and emit not in EMIT_FORMATS:
        raise ConfigError(f"--emit {emit!r} is not a format; choose one of: {', '.join(EMIT_FORMATS)}")


def plan_compose(
    plan: Any, *, host: str = "127.0.0.1", gpus: int = 1, compute_capability: str | None = None
) -> str:
    """A plan's compose service (`servelab plan --emit compose`, and each front member of `servelab advise`): its
    engine's image, or the fork's build where only a fork loads its format."""
    from servelab.engines.registry import get_engine

    engine = get_engine(plan.engine)
    port = int(plan.command[plan.command.index("--port") + 1])
    build = (
        engine.source_build(plan.quant) if engine.source_build else None
    )  # the official image cannot load it
    return compose_service(
        plan.engine,
        list(plan.command),
        image=engine.image or "",
        port=port,
        health_path=engine.health_path,
        host=host,
        gpus=gpus,
        build=build,
        compute_capability=compute_capability,
    ).rstrip("\n")

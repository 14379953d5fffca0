"""An engine command line taken apart: ``VAR=value`` words, ``docker run … IMAGE args``, the engine it launches.

Three kinds are told apart: a launch of a known engine (each engine's ``cmdline.recognises`` says so, or
the image of ``docker run`` / a compose service names the engine whose entrypoint gets the words), bare
flags (the first word starts with ``-``: flags of the engine that answers), and anything else: ConfigError.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from servelab.engines import registry
from servelab.engines.base import CommandLine
from servelab.errors import ConfigError

_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_WRAPPERS = ("env", "nohup", "exec")
# programs that run another command after options of their own: the engine launch is found after them
_LAUNCHERS = {
    ("uv", "run"),
    ("uvx",),
    ("pipx", "run"),
    ("sudo",),
    ("numactl",),
    ("taskset",),
    ("nice",),
    ("timeout",),
    ("stdbuf",),
    ("chrt",),
}
_CONTAINER_TOOLS = ("docker", "podman", "nerdctl")
# `docker run` options that take no value; every other option takes the next word unless written --opt=value
_RUN_SWITCHES = frozenset(
    {
        "-d",
        "--detach",
        "-i",
        "--interactive",
        "-t",
        "--tty",
        "-it",
        "-ti",
        "-dit",
        "-itd",
        "--rm",
        "--init",
        "--privileged",
        "-P",
        "--publish-all",
        "--read-only",
        "--no-healthcheck",
        "--oom-kill-disable",
        "--sig-proxy",
        "-q",
        "--quiet",
    }
)


@dataclass(frozen=True)
class EngineCommand:
    """A command line's engine (None: bare flags), its words from the program (or first flag) on, its environment,
    the container image that runs it (None outside a container)."""

    engine: str | None
    argv: tuple[str, ...]
    environment: dict[str, str] = field(default_factory=dict)
    image: str | None = None


def cmdlines() -> dict[str, CommandLine]:
    """Every engine's command-line reader, by engine name (engines without one are left out)."""
    return {e.name: e.cmdline for e in registry.engines() if e.cmdline is not None}


def engine_of_command(argv: list[str]) -> str | None:
    """The engine a command line runs, from its program words; None when no engine recognises them."""
    return next((name for name, reader in cmdlines().items() if reader.recognises(argv)), None)


def image_engine(image: str | None) -> str | None:
    """The engine a container image name points at (``vllm/vllm-openai`` → vllm), else None."""
    lowered = (image or "").lower()
    return next(
        (name for name, reader in cmdlines().items() if any(w in lowered for w in reader.IMAGE_WORDS)), None
    )


def read_command(
    command: str | list[str], *, source: str = "--cmd", image: str | None = None
) -> EngineCommand:
    """Tell a launch of a known engine from bare flags; refuse anything else. ``image``: whose entrypoint runs it."""
    words = split_words(command, source)
    environment, words = _strip_prefixes(words)
    words = _after_launcher(words)
    if words[:1] and words[0] in _CONTAINER_TOOLS and words[1:2] == ["run"]:
        image, run_environment, words = _container_run(words[2:], source)
        environment = {**environment, **run_environment}
    engine = engine_of_command(words) or image_engine(image)
    if engine is None and not (words and words[0].startswith("-")):
        raise ConfigError(
            f"{source}: {shlex.join(words[:3]) or 'an empty command'!r} does not launch a known engine; "
            f"give {', '.join(launch_forms())} (after VAR=value words, `uv run …`, `sudo …` or "
            "`docker run … IMAGE` if need be), or bare flags starting with '-' for the engine that "
            "answers"
        )
    return EngineCommand(engine, tuple(words), environment, image)


def launch_forms() -> tuple[str, ...]:
    """Every engine's accepted launch spellings, for messages."""
    return tuple(form for reader in cmdlines().values() for form in reader.LAUNCH_FORMS)


def split_words(command: str | list[str], source: str) -> list[str]:
    """A shell-quoted string split with shlex (ConfigError on an unclosed quote); a list taken as words."""
    if not isinstance(command, str):
        return [str(word) for word in command]
    try:
        return shlex.split(command)
    except ValueError as exc:  # an unclosed quote
        raise ConfigError(f"{source}: cannot split the command line ({exc}); check its quotes") from exc


def _strip_prefixes(words: list[str]) -> tuple[dict[str, str], list[str]]:
    """Leading ``VAR=value`` words and ``env``/``nohup``/``exec`` wrappers: the environment and the rest."""
    environment: dict[str, str] = {}
    i = 0
    while i < len(words) and (_ASSIGNMENT.match(words[i]) or words[i] in _WRAPPERS):
        name, eq, value = words[i].partition("=")
        if eq:
            environment[name] = value
        i += 1
    return environment, words[i:]


def _after_launcher(words: list[str]) -> list[str]:
    """``uv run [OPTIONS] vllm serve …``, ``sudo -E …``, ``numactl -N 0 …``: the words from the engine launch
    (the first place an engine recognises, or a ``docker run``) on; the words unchanged when there is no
    launcher or nothing after it launches an engine."""
    if not any(tuple(words[: len(launcher)]) == launcher for launcher in _LAUNCHERS):
        return words
    for i in range(1, len(words)):
        if engine_of_command(words[i:]) or (words[i] in _CONTAINER_TOOLS and words[i + 1 : i + 2] == ["run"]):
            return words[i:]
    return words


def _container_run(words: list[str], source: str) -> tuple[str, dict[str, str], list[str]]:
    """``[OPTIONS] IMAGE [ARGS]`` of ``docker run``: the image, ``-e``/``--env`` variables, the args.

    ``--entrypoint PROGRAM`` comes back as the first arg.
    """
    options: dict[str, list[str]] = {}
    i = 0
    while i < len(words) and words[i].startswith("-"):
        name, eq, inline = words[i].partition("=")
        takes_value = not eq and name not in _RUN_SWITCHES
        value = inline if eq else (words[i + 1] if takes_value and i + 1 < len(words) else "")
        options.setdefault(name, []).append(value)
        i += 2 if takes_value else 1
    if i >= len(words):
        raise ConfigError(f"{source}: no image found in the `docker run` command line")
    environment = dict(v.partition("=")[::2] for n in ("-e", "--env") for v in options.get(n, []) if "=" in v)
    entrypoint = options["--entrypoint"][-1].split() if options.get("--entrypoint") else []
    return words[i], environment, entrypoint + words[i + 1 :]

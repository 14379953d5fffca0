"""A small scanner for engine command lines: known flags in, canonical keys and raw values out.

Each engine's ``cmdline.py`` declares its flags as a table of ``Flag``; unknown flags are skipped with
their value, so sampling and logging options never get in the way. Values stay strings here; the engine
module converts them and says which flag was wrong.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from servelab import redact
from servelab.errors import ConfigError


@dataclass(frozen=True)
class Flag:
    """One flag and its spellings. ``value`` None: takes the next word; otherwise a switch setting it.

    ``optional_values``: the next word is taken only when it is one of these (llama.cpp's ``-fa [on|off]``).
    """

    names: tuple[str, ...]
    key: str
    value: Any = None
    optional_values: tuple[str, ...] = ()


def scan(argv: list[str], flags: tuple[Flag, ...]) -> tuple[dict[str, Any], list[str]]:
    """Known flags (last one wins) and the positional words, from an argv without the program name."""
    by_name = {name: flag for flag in flags for name in flag.names}
    found: dict[str, Any] = {}
    positionals: list[str] = []
    i = 0
    while i < len(argv):
        word = argv[i]
        name, eq, inline = word.partition("=") if word.startswith("--") else (word, "", "")
        flag = by_name.get(name)
        if flag is None:
            i += _skip_unknown(argv, i, positionals)
            continue
        found[flag.key], used = _value(flag, argv, i, inline if eq else None)
        i += used
    return found, positionals


def _value(flag: Flag, argv: list[str], i: int, inline: str | None) -> tuple[Any, int]:
    if inline is not None:
        return inline, 1
    following = argv[i + 1] if i + 1 < len(argv) else None
    if flag.optional_values:
        return (following, 2) if following in flag.optional_values else (True, 1)
    if flag.value is not None:
        return flag.value, 1
    if following is None:
        raise ConfigError(f"{argv[i]} needs a value in the engine command line")
    return following, 2


def _skip_unknown(argv: list[str], i: int, positionals: list[str]) -> int:
    """Skip an unknown flag and its value (a following word that is not itself a flag)."""
    word = argv[i]
    if not word.startswith("-") or _is_number(word):
        positionals.append(word)
        return 1
    following = argv[i + 1] if i + 1 < len(argv) else None
    takes_value = (
        "=" not in word and following is not None and (not following.startswith("-") or _is_number(following))
    )
    return 2 if takes_value else 1


def _is_number(word: str) -> bool:
    try:
        float(word)
    except ValueError:
        return False
    return True


def python_module(argv: list[str]) -> str | None:
    """MODULE of ``python… [-u] -m MODULE …`` (any path or version of python), else None."""
    program = os.path.basename(argv[0]) if argv else ""
    if not program.startswith("python") or "-m" not in argv[:3]:
        return None
    i = argv.index("-m") + 1
    return argv[i] if i < len(argv) else None


def to_int(flags: dict[str, Any], key: str, spelled: str) -> int | None:
    """An integer flag value; ConfigError naming the flag otherwise.

    Accepts vLLM's human-readable suffixes: k = 1000, K = 1024, m = 10^6, M = 2^20 (vllm human_readable_int).
    """
    text = flags.get(key)
    if text is None:
        return None
    units = {"k": 1000, "K": 1024, "m": 1000**2, "M": 1024**2}
    raw = str(text).strip()
    scale = units.get(raw[-1:], 1)
    try:
        return int(float(raw[:-1] if scale > 1 else raw) * scale)
    except ValueError:
        raise ConfigError(f"{spelled} expects a whole number, got {text!r}") from None


def to_float(flags: dict[str, Any], key: str, spelled: str) -> float | None:
    text = flags.get(key)
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        raise ConfigError(f"{spelled} expects a number, got {text!r}") from None


def is_on(value: Any) -> bool | None:
    """A switch or on/off/auto word as a bool (None for auto/absent)."""
    if value is None or value == "auto":
        return None
    return value is True or str(value).lower() in ("on", "1", "true", "yes", "enabled")


SECRET_FLAGS = (
    "--api-key",
    "--hf-token",
    "--token",
)  # llama.cpp, sglang and vLLM all spell the key --api-key


def redact_argv(argv: list[str]) -> list[str]:
    """The argv with the values of secret flags (``--api-key K`` and ``--api-key=K``) hidden, for display."""
    return redact.redact_argv(argv, SECRET_FLAGS)


def take_api_keys(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """``argv`` without its ``--api-key K`` / ``--api-key=K`` words, and the keys they held, in order: a launcher
    hands the keys to its engine through the environment, never on a command line every user can read."""
    kept: list[str] = []
    keys: list[str] = []
    words = iter(enumerate(argv))
    for i, word in words:
        if word == "--api-key" and i + 1 < len(argv):
            keys.append(argv[i + 1])
            next(words)
        elif word.startswith("--api-key="):
            keys.append(word.partition("=")[2])
        else:
            kept.append(word)
    return kept, keys


def api_key_of(argv: list[str]) -> str | None:
    """The ``--api-key`` an engine was started with (last one wins), so servelab can talk to it."""
    key = None
    for i, word in enumerate(argv):
        if word == "--api-key" and i + 1 < len(argv):
            key = argv[i + 1]
        elif word.startswith("--api-key="):
            key = word.partition("=")[2]
    return key


def quant_of_flag(table: dict[str, str], value: str | None) -> str | None:
    """The servelab quant name an engine's ``--quantization`` value stands for (``table``: name -> value, the
    writer's own), or None when the value is not in it."""
    if not value:
        return None
    wanted = value.lower()
    return next((name for name, flag in table.items() if wanted in (name, flag)), None)


def check_setting_words(
    argv: list[str], flags: tuple[Flag, ...], shared: dict[str, str], engine: str
) -> None:
    """The words after `servelab plan … --` hold only the engine's own flags: a word its reader would skip, or
    a flag one of servelab's options sets (`shared`: key -> that option), is one ConfigError line."""
    by_name = {name: flag for flag in flags for name in flag.names}
    i = 0
    while i < len(argv):
        word = argv[i]
        name = word.partition("=")[0] if word.startswith("--") else word
        flag = by_name.get(name)
        if flag is None:
            raise ConfigError(
                f"{word!r} after --: not a {engine} flag servelab plans; see `servelab plan --help` for its flags"
            )
        if flag.key in shared:
            raise ConfigError(f"{word} after --: give servelab's {shared[flag.key]} instead (before --)")
        _, used = _value(
            flag, argv, i, word.partition("=")[2] if "=" in word and word.startswith("--") else None
        )
        i += used

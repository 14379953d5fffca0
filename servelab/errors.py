"""The one exception tree of servelab.

    ServelabError                  base; the CLI prints its message as one line
    ├── ConfigError                bad user input: unknown model/GPU/quant, bad flag value (exit 2)
    ├── ModelFormatError           a model file or config that cannot be read (truncated, corrupt, hostile)
    ├── EngineError                an engine that cannot be built, started, reached or understood
    │   └── EngineStartError       an engine that died or never became healthy; carries the log tail
    ├── TargetError                a benchmark target that is unreachable, not OpenAI-compatible, lacks the model
    ├── StoreError                 the SQLite result store (sqlite3 errors are mapped here)
    └── DeviceError                GPU / NVML / driver queries that failed

Foreign exceptions (aiohttp, sqlite3, OSError, json) are mapped at the boundary with ``raise ... from exc``.
"""

from __future__ import annotations


class ServelabError(Exception):
    """Base of every error servelab raises on purpose. ``exit_code`` is what the CLI exits with."""

    exit_code = 1


class ConfigError(ServelabError):
    """The user asked for something invalid; the message names the valid choices."""

    exit_code = 2


class ModelFormatError(ServelabError):
    """A model file or configuration is malformed, truncated or hostile."""


class EngineError(ServelabError):
    """An inference engine could not be built, started, reached or understood."""


class EngineStartError(EngineError):
    """The engine died at start or never became healthy."""

    def __init__(self, message: str, log_tail: str = "") -> None:
        super().__init__(message)
        self.log_tail = log_tail


class TargetError(ServelabError):
    """A benchmark or verify target is unreachable or not what it claims to be."""


class StoreError(ServelabError):
    """The result store failed (mapped from sqlite3)."""


class DeviceError(ServelabError):
    """A GPU/driver query failed."""

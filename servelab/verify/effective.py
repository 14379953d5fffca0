"""What a running server really uses, read from its own endpoints into one typed value: what every engine may
report, and `own`, what only that engine reports (its `Engine.reported_type`, in its own package).

An engine's ``read_effective`` returns a dict of these field names and its own type's. A key neither knows is
kept under ``raw["extra"]`` in production, but refused under ``strict`` (the test suite sets
``SERVELAB_STRICT=1``), so a field an engine package adds without a home fails a test instead of vanishing.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any

from servelab.engines import registry
from servelab.engines.detect import DetectedEngine, detect_engine, endpoints_for
from servelab.engines.http import HttpProbe
from servelab.redact import redact


@dataclass(frozen=True)
class EffectiveConfig:
    """The effective configuration. None means the engine does not report it.

    ``context_per_slot`` is the longest request one slot/sequence can hold (llama.cpp: -c divided by -np,
    capped at ``context_train``; sglang: context_length; vLLM: max_model_len; Ollama: the served num_ctx).
    ``max_total_tokens`` is the KV pool's capacity in tokens, all requests together.
    """

    engine: str
    context_per_slot: int | None = None
    slots: int | None = None
    context_train: int | None = None
    kv_cache_dtype: str | None = None
    model: str | None = None
    max_total_tokens: int | None = None
    tp_size: int | None = None
    speculative: dict[str, Any] | None = None
    version: str | None = None
    own: Any = (
        None  # what only this engine reports: an `Engine.reported_type` value (None: the engine has none)
    )
    raw: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_fields(
        cls, engine: str, fields: dict[str, Any], *, strict: bool = False, own_type: type | None = None
    ) -> EffectiveConfig:
        """Build from an engine's ``read_effective`` dict, its own keys into `own_type`; keys neither knows go to
        ``raw["extra"]``, or raise ValueError when `strict`."""
        known = {f.name for f in dataclasses.fields(cls)} - {"engine", "raw", "own"}
        owned = set() if own_type is None else {f.name for f in dataclasses.fields(own_type)}
        values = {k: v for k, v in fields.items() if k in known}
        extra = {k: v for k, v in fields.items() if k not in known | owned and k != "raw"}
        if strict and extra:
            raise ValueError(f"{engine}: read_effective returned keys EffectiveConfig does not know: "
                             f"{', '.join(sorted(extra))}; add them as fields, to the engine's reported type, "
                             "or put them under 'raw'")  # fmt: skip
        raw = {**(fields.get("raw") or {}), **({"extra": extra} if extra else {})}
        own = None if own_type is None else own_type(**{k: v for k, v in fields.items() if k in owned})
        return cls(engine=engine, raw=redact(raw), own=own, **values)

    def reported(self) -> dict[str, Any]:
        """Every reported field by name, the engine's own among them (None where it does not say); no raw."""
        shared = {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if f.name not in ("engine", "raw", "own")
        }
        own = {} if self.own is None else dataclasses.asdict(self.own)
        return {**shared, **own}

    def summary(self) -> dict[str, Any]:
        """The reported fields without raw or empty ones, for tables."""
        return {k: v for k, v in self.reported().items() if v is not None}


def read_effective(
    base_url: str,
    *,
    engine: DetectedEngine | str | None = None,
    api_key: str | None = None,
    timeout_s: float = 5.0,
    model: str | None = None,
    strict: bool | None = None,
    max_bytes: int | None = None,
) -> EffectiveConfig:
    """Detect the engine (unless given) and read its effective configuration (of ``model`` where it serves several).
    `strict` (default: the environment variable ``SERVELAB_STRICT=1``) refuses keys EffectiveConfig lacks."""
    if engine is None:
        engine = detect_engine(base_url, api_key=api_key, timeout_s=timeout_s, max_bytes=max_bytes)
    name = engine.name if isinstance(engine, DetectedEngine) else engine
    probe = HttpProbe(base_url, api_key, timeout_s)
    if max_bytes is not None:
        probe = dataclasses.replace(probe, max_bytes=max_bytes)
    strict = os.environ.get("SERVELAB_STRICT") == "1" if strict is None else strict
    fields = endpoints_for(name).read_effective(probe, model)
    known = registry.find_engine(name)
    own_type = known.reported_type if known is not None else None
    config = EffectiveConfig.from_fields(name, fields, strict=strict, own_type=own_type)
    if config.version is None and isinstance(engine, DetectedEngine) and engine.version:
        config = dataclasses.replace(config, version=engine.version)
    return config

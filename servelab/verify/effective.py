"""What a running server really uses, read from its own endpoints into one typed value: what every engine may
report, and `own`, what only that engine reports (its `Engine.reported_type`, in its own package).

An engine's ``read_effective`` returns a dict of these field names and its own type's. A key neither knows is
kept under ``raw["extra"]`` in production, but refused under ``strict`` (the test suite sets
``SERVELAB_STRICT=1``), so a field an engine package adds without a home fails a test instead of vanishing.
"""

from __future__ import annotations

import dataclasses
import os

from servelab.engines import registry
from servelab.engines.detect import DetectedEngine, detect_engine, endpoints_for
from servelab.engines.http import HttpProbe
from servelab.results.configs import EffectiveConfig


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

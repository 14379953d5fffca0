"""``verify(url, asked)``: read what a running server really uses and diff it against what was asked."""

from __future__ import annotations

from dataclasses import dataclass

from servelab.engines import registry
from servelab.engines.detect import DetectedEngine, detect_engine
from servelab.engines.http import public_url
from servelab.results.configs import Asked
from servelab.verify.diff import Mismatch, Unverified, diff
from servelab.verify.effective import EffectiveConfig, read_effective


@dataclass(frozen=True, kw_only=True)
class VerifyResult:
    """The engine, its effective configuration and every asked-versus-got difference."""

    url: str
    engine: str
    version: str | None
    effective: EffectiveConfig
    asked: dict[str, object]
    mismatches: tuple[Mismatch, ...]
    unverified: tuple[Unverified, ...]
    matched: tuple[str, ...]
    notes: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.mismatches


def verify(
    url: str,
    asked: Asked | None = None,
    *,
    api_key: str | None = None,
    timeout_s: float = 5.0,
    engine: DetectedEngine | None = None,
    max_bytes: int | None = None,
) -> VerifyResult:
    """Detect the engine at ``url``, read its effective configuration, diff it against ``asked``."""
    detected = engine or detect_engine(url, api_key=api_key, timeout_s=timeout_s, max_bytes=max_bytes)
    asked = asked or Asked()
    scoped = (found := registry.find_engine(detected.name)) is not None and found.model_scoped_endpoints
    model = asked.values.get("model") if scoped else None
    effective = read_effective(
        url, engine=detected, api_key=api_key, timeout_s=timeout_s, model=model, max_bytes=max_bytes
    )
    return compare(public_url(url), effective, asked)


def compare(url: str, effective: EffectiveConfig, asked: Asked) -> VerifyResult:
    """Pure: the result for an already-read effective configuration."""
    found = diff(asked, effective)
    return VerifyResult(
        url=url,
        engine=effective.engine,
        version=effective.version,
        effective=effective,
        asked=dict(asked.values),
        mismatches=_engine_mismatch(asked, effective) + found.mismatches,
        unverified=found.unverified,
        matched=found.matched,
        notes=found.notes,
    )


def _engine_mismatch(asked: Asked, effective: EffectiveConfig) -> tuple[Mismatch, ...]:
    """The command or plan was written for another engine than the one answering."""
    if asked.engine is None or asked.engine == effective.engine:
        return ()
    why = f"engine is {effective.engine}, not {asked.engine}: another server answers at this URL"
    fix = "point verify at the server that command started, or pass that server's own command"
    return (Mismatch("engine", asked.engine, effective.engine, why, fix, "--cmd/--compose/--plan"),)

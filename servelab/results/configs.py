"""What a verification compares: the configuration asked for (`Asked`) and the one a running server reports
(`EffectiveConfig`). Engines' verify rules read both; `verify/` builds them (asked.py from flags, a command or a
plan; effective.py from the server's endpoints)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from servelab.redact import redact


@dataclass(frozen=True)
class Asked:
    """Expectations keyed by EXPECT_KEYS; ``sources[key]`` says where each came from."""

    values: dict[str, Any] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    engine: str | None = None
    launch: Any = None  # the engine's parsed command line (LlamaCppLaunch, SglangLaunch, VllmLaunch)

    def merged(self, later: Asked) -> Asked:
        """``later`` wins key by key; the launch and engine are kept from whichever has them."""
        return Asked(
            {**self.values, **later.values},
            {**self.sources, **later.sources},
            later.engine or self.engine,
            later.launch if later.launch is not None else self.launch,
        )


@dataclass(frozen=True, kw_only=True)
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
            raise ValueError(
                f"{engine}: read_effective returned keys EffectiveConfig does not know: "
                f"{', '.join(sorted(extra))}; add them as fields, to the engine's reported type, "
                "or put them under 'raw'"
            )
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

"""Who the toy server is: anything answering /sim/requests; its context is /v1/models' max_model_len."""

from __future__ import annotations

from typing import Any

from servelab.engines.http import DetectedEngine, HttpProbe


def identify(probe: HttpProbe) -> DetectedEngine | None:
    if probe.get_json("/sim/requests") is None:
        return None
    models = probe.get_json("/v1/models") or {}
    ids = tuple(str(m.get("id")) for m in models.get("data", ()) if isinstance(m, dict))
    return DetectedEngine("toy", "0.1-toy", ids, {"v1_models": models})


def read_effective(probe: HttpProbe, model: str | None = None) -> dict[str, Any]:
    models = probe.get_json("/v1/models") or {}
    first = next(iter(models.get("data", ())), {})
    return {"context_per_slot": first.get("max_model_len"), "model": first.get("id"), "slots": 1}

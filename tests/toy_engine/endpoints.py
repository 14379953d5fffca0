"""Who the toy server is: anything answering /sim/requests; its context is /v1/models' max_model_len, its step
budget (only a toy server reports one) the `@step=N` its model id ends with."""

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
    name, _, step = str(first.get("id")).partition("@step=")
    return {
        "context_per_slot": first.get("max_model_len"),
        "model": name,
        "slots": 1,
        "step_tokens": int(step) if step.isdigit() else None,
    }

"""Any OpenAI-compatible server (NInfer and others): /v1/models is all we can count on."""

from __future__ import annotations

from typing import Any

from servelab.engines.http import DetectedEngine, HttpProbe


def identify(probe: HttpProbe) -> DetectedEngine | None:
    models = probe.get_json("/v1/models")
    data = models.get("data") if isinstance(models, dict) else None
    if not isinstance(data, list):
        return None
    ids = tuple(str(m["id"]) for m in data if isinstance(m, dict) and m.get("id"))
    return DetectedEngine("openai", None, ids, {"v1_models": models})


def read_effective(probe: HttpProbe, model: str | None = None) -> dict[str, Any]:
    return effective_from(probe.get_json("/v1/models"), model)


def effective_from(models: Any, model: str | None = None) -> dict[str, Any]:
    """Pure: what /v1/models tells of ``model`` (or the first); some servers add max_model_len or context_length."""
    data = models.get("data") if isinstance(models, dict) else None
    entries = [m for m in data or () if isinstance(m, dict)]
    first = next((m for m in entries if m.get("id") == model), entries[0] if entries else {})
    context = first.get("max_model_len") or first.get("context_length")
    return {
        "context_per_slot": context if isinstance(context, int) else None,
        "model": first.get("id"),
        "raw": {"v1_models": models},
    }

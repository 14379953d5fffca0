"""Any OpenAI-compatible server (NInfer and others): /v1/models is all we can count on."""

from __future__ import annotations

from typing import Any

from servelab.engines.probe import DetectedEngine, HttpProbe


def identify(probe: HttpProbe) -> DetectedEngine | None:
    models = probe.get_json("/v1/models")
    data = models.get("data") if isinstance(models, dict) else None
    if not isinstance(data, list):
        return None
    ids = tuple(str(m["id"]) for m in data if isinstance(m, dict) and m.get("id"))
    return DetectedEngine("openai", None, ids, {"v1_models": models})


def read_effective(probe: HttpProbe) -> dict[str, Any]:
    return effective_from(probe.get_json("/v1/models"))


def effective_from(models: Any) -> dict[str, Any]:
    """Pure: what /v1/models tells; some servers add max_model_len (vLLM-style) or context_length."""
    data = models.get("data") if isinstance(models, dict) else None
    first = data[0] if isinstance(data, list) and data and isinstance(data[0], dict) else {}
    context = first.get("max_model_len") or first.get("context_length")
    return {
        "context_per_slot": context if isinstance(context, int) else None,
        "model": first.get("id"),
        "raw": {"v1_models": models},
    }

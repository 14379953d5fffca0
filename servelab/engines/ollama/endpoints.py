"""Ollama's own endpoints: /api/version, /api/tags, /api/ps (loaded models) and POST /api/show.

/api/ps ``models[].context_length`` (api/types.go ProcessModelResponse, newer versions) is the window
actually served; ``size_vram < size`` means part of the model runs on the CPU. /api/show
``model_info["<arch>.context_length"]`` is the TRAINING context; ``parameters`` holds ``num_ctx`` only when
the Modelfile sets it.
"""

from __future__ import annotations

from typing import Any

from servelab.engines.http import DetectedEngine, HttpProbe


def identify(probe: HttpProbe) -> DetectedEngine | None:
    version = probe.get_json("/api/version")
    if not isinstance(version, dict) or "version" not in version:
        return None
    tags = probe.get_json("/api/tags")
    names = tuple(str(m.get("name")) for m in _models(tags) if m.get("name"))
    return DetectedEngine("ollama", str(version["version"]), names, {"version": version, "tags": tags})


def read_effective(probe: HttpProbe, model: str | None = None) -> dict[str, Any]:
    """Reads the loaded model (or ``model``) from /api/ps and its details from /api/show."""
    ps = probe.get_json("/api/ps")
    loaded = _pick(_models(ps), model)
    name = model or loaded.get("model") or loaded.get("name") or _first_tag(probe)
    show = probe.post_json("/api/show", {"model": name}) if name else None
    version = probe.get_json("/api/version")
    return effective_from(ps, show if isinstance(show, dict) else {}, name, version)


def effective_from(ps: Any, show: dict[str, Any], model: str | None, version: Any) -> dict[str, Any]:
    """Pure: effective settings from /api/ps, /api/show of ``model`` and /api/version."""
    loaded = _pick(_models(ps), model)
    parameters = show.get("parameters")
    params = parse_parameters(parameters if isinstance(parameters, str) else "")
    size, size_vram = loaded.get("size"), loaded.get("size_vram")
    return {
        "context_per_slot": loaded.get("context_length") or _int(params.get("num_ctx")),
        "slots": None,
        "context_train": training_context(_dict(show.get("model_info"))),
        "kv_cache_dtype": None,
        "model": model,
        "max_total_tokens": None,
        "loaded": bool(loaded),
        "size_bytes": size,
        "size_vram_bytes": size_vram,
        "gpu_fraction": round(size_vram / size, 3)
        if isinstance(size, int) and size and isinstance(size_vram, int)
        else None,
        "speculative": None,
        "version": version.get("version") if isinstance(version, dict) else None,
        "raw": {
            "ps": ps,
            "show": {k: v for k, v in show.items() if k not in ("modelfile", "template", "license")},
        },
    }


def training_context(model_info: dict[str, Any]) -> int | None:
    """``<general.architecture>.context_length`` from /api/show model_info."""
    arch = model_info.get("general.architecture")
    value = model_info.get(f"{arch}.context_length") if arch else None
    return value if isinstance(value, int) else None


def parse_parameters(text: str) -> dict[str, str]:
    """Modelfile PARAMETER lines ("num_ctx 8192\\nstop ...") as a dict; repeated keys keep the first."""
    result: dict[str, str] = {}
    for line in text.splitlines():
        key, _, value = line.strip().partition(" ")
        if key and key not in result:
            result[key] = value.strip().strip('"')
    return result


def _pick(models: list[dict[str, Any]], name: str | None) -> dict[str, Any]:
    """The entry for ``name`` (Ollama's "llama3.2" means "llama3.2:latest"), or the first when None."""
    wanted = {name, f"{name}:latest"}
    matching = [m for m in models if name is None or wanted & {m.get("name"), m.get("model")}]
    return matching[0] if matching else {}


def _first_tag(probe: HttpProbe) -> str | None:
    names = [m.get("name") for m in _models(probe.get_json("/api/tags")) if m.get("name")]
    return names[0] if names else None


def _models(body: Any) -> list[dict[str, Any]]:
    models = body.get("models") if isinstance(body, dict) else None
    return [m for m in models or () if isinstance(m, dict)]


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _int(text: str | None) -> int | None:
    return int(text) if text and text.isdigit() else None

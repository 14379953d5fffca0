"""llama-server's own endpoints: who it is (/props, /v1/models) and what it really runs with.

Field names from llama.cpp tools/server/server-context.cpp (get_res_props, get_res_model_info) and
server-task.cpp (slot to_json), as vendored in llama-cpp-python 0.3.36 (build b1-0c1e570).
``default_generation_settings.n_ctx`` is the PER-SLOT context, after -c is divided by -np and capped at
the model's training context.
"""

from __future__ import annotations

from typing import Any

from servelab.engines.http import DetectedEngine, HttpProbe
from servelab.engines.values import count, flag, text


def identify(probe: HttpProbe) -> DetectedEngine | None:
    """A llama-server answers /props with default_generation_settings and total_slots."""
    props = probe.get_json("/props")
    if not isinstance(props, dict) or "default_generation_settings" not in props:
        return None
    models = probe.get_json("/v1/models")
    raw = {"props": props, "v1_models": models, "health": probe.get_json("/health")}
    return DetectedEngine("llamacpp", text(props.get("build_info")), _model_ids(models, props), raw)


def read_effective(probe: HttpProbe, model: str | None = None) -> dict[str, Any]:
    """Effective settings as EffectiveConfig field names, plus ``raw``. One model per server: ``model`` unused."""
    props = _dict(probe.get_json("/props"))
    models = probe.get_json("/v1/models")
    slots = probe.get_json("/slots")
    return effective_from(props, models, slots)


def effective_from(props: dict[str, Any], models: Any, slots: Any) -> dict[str, Any]:
    """Pure: the effective settings from the bodies of /props, /v1/models and /slots."""
    settings = _dict(props.get("default_generation_settings"))
    meta = _dict(_first_model(models).get("meta"))
    slot_list = slots if isinstance(slots, list) else []
    return {
        "context_per_slot": count(settings.get("n_ctx")) or count(meta.get("n_ctx")),
        "slots": count(props.get("total_slots")) or (len(slot_list) or None),
        "context_train": count(meta.get("n_ctx_train")),
        "kv_cache_dtype": None,  # llama-server does not report the cache type on any endpoint
        "model": text(props.get("model_alias"))
        or text(_first_model(models).get("id"))
        or text(props.get("model_path")),
        "max_total_tokens": None,
        "kv_unified": flag(props.get("kv_unified")),  # exposed by some builds only
        "speculative": _speculative(slot_list, settings),
        "version": text(props.get("build_info")),
        "raw": {"props": _without_templates(props), "v1_models": models, "slots": slots},
    }


def _speculative(slot_list: list[Any], settings: dict[str, Any]) -> dict[str, Any]:
    """Drafting is on when a slot says so; /props' params 'speculative.types' stays "none" even then."""
    slot_flags = [bool(s.get("speculative")) for s in slot_list if isinstance(s, dict)]
    return {"enabled": any(slot_flags) if slot_flags else bool(settings.get("speculative"))}


def _without_templates(props: dict[str, Any]) -> dict[str, Any]:
    """Chat templates are long and say nothing about capacity; keep the rest."""
    return {k: v for k, v in props.items() if not k.startswith("chat_template") and k != "ui_settings"}


def _first_model(models: Any) -> dict[str, Any]:
    data = models.get("data") if isinstance(models, dict) else None
    return data[0] if isinstance(data, list) and data and isinstance(data[0], dict) else {}


def _model_ids(models: Any, props: dict[str, Any]) -> tuple[str, ...]:
    data = models.get("data") if isinstance(models, dict) else None
    ids = tuple(i for m in data or () if isinstance(m, dict) and (i := text(m.get("id"))))
    return ids or tuple(i for k in ("model_alias", "model_path") if (i := text(props.get(k))))[:1]


def _dict(value: Any) -> dict[str, Any]:
    """A server's object, or {} when it sent something else (a list, a string)."""
    return value if isinstance(value, dict) else {}

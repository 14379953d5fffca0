"""sglang's own endpoints: /get_server_info (newer alias /server_info), /get_model_info, /v1/models.

/get_server_info is ``{**dataclasses.asdict(server_args), **scheduler_info, "internal_states": [...],
"version": ...}`` (python/sglang/srt/entrypoints/http_server.py); scheduler_info carries
max_total_num_tokens and max_req_input_len; internal_states[i].memory_usage.token_capacity repeats the
pool size per data-parallel rank.
"""

from __future__ import annotations

from typing import Any

from servelab.engines.http import DetectedEngine, HttpProbe
from servelab.engines.values import count, number, scalar, text
from servelab.redact import redact

SERVER_INFO_PATHS = ("/get_server_info", "/server_info")
SPECULATIVE_KEYS = (
    "speculative_algorithm",
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
    "speculative_draft_model_path",
)


def server_info(probe: HttpProbe) -> dict[str, Any] | None:
    """The server-info body, from whichever of the two paths this version serves."""
    for path in SERVER_INFO_PATHS:
        info = probe.get_json(path)
        if isinstance(info, dict) and ("tp_size" in info or "max_total_num_tokens" in info):
            return info
    return None


def identify(probe: HttpProbe) -> DetectedEngine | None:
    info = server_info(probe)
    if info is None:
        return None
    about = model_info(probe)
    models = (
        _model_ids(probe.get_json("/v1/models"))
        or tuple(x for key in ("served_model_name", "model_path") if (x := text(info.get(key))))[:1]
    )
    raw = redact({"server_info": info, "model_info": about})
    return DetectedEngine("sglang", text(info.get("version")), models, raw)


def read_effective(probe: HttpProbe, model: str | None = None) -> dict[str, Any]:
    """Effective settings; sglang serves one model, so ``model`` is not needed."""
    return effective_from(server_info(probe) or {}, model_info(probe))


def model_info(probe: HttpProbe) -> Any | None:
    """/get_model_info, or /model_info on versions that renamed it."""
    found = probe.get_json("/get_model_info")
    return found if found is not None else probe.get_json("/model_info")


def effective_from(info: dict[str, Any], model_info: Any) -> dict[str, Any]:
    """Pure: effective settings from the /get_server_info and /get_model_info bodies."""
    state = _first_state(info)
    capacity = count(info.get("max_total_num_tokens")) or count(
        _dict(state.get("memory_usage")).get("token_capacity")
    )
    spec = {k: scalar(info.get(k)) for k in SPECULATIVE_KEYS if scalar(info.get(k)) is not None}
    model_path = text(model_info.get("model_path")) if isinstance(model_info, dict) else None
    return {
        "context_per_slot": _context_length(info, model_info),
        "slots": count(info.get("max_running_requests")),
        "context_train": None,
        "kv_cache_dtype": text(info.get("kv_cache_dtype")),
        "model": text(info.get("served_model_name")) or model_path or text(info.get("model_path")),
        "max_total_tokens": capacity,
        "max_request_input_tokens": count(info.get("max_req_input_len")),
        "mem_fraction_static": number(info.get("mem_fraction_static")),
        "tp_size": count(info.get("tp_size")),
        "quantization": text(info.get("quantization")),
        "speculative": {"enabled": bool(spec.get("speculative_algorithm")), **spec} if info else None,
        "version": text(info.get("version")),
        "raw": {"server_info": info, "model_info": model_info},
    }


def _context_length(info: dict[str, Any], model_info: Any) -> int | None:
    """The served context: the --context-length argument, else the model's own (newer /get_model_info)."""
    asked = count(info.get("context_length"))
    if asked is not None:
        return asked
    return count(model_info.get("context_length")) if isinstance(model_info, dict) else None


def _first_state(info: dict[str, Any]) -> dict[str, Any]:
    states = info.get("internal_states")
    return states[0] if isinstance(states, list) and states and isinstance(states[0], dict) else {}


def _model_ids(models: Any) -> tuple[str, ...]:
    data = models.get("data") if isinstance(models, dict) else None
    return tuple(i for m in data or () if isinstance(m, dict) and (i := text(m.get("id"))))


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}

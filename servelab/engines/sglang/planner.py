"""sglang's planner adapter: its memory rules (memory.py) for one request, as an EngineFit with its launch
words. Reached through the registry's Planner (engine.py).
"""

from __future__ import annotations

from servelab.engines.sglang import DEFAULT_PORT, cmdline
from servelab.engines.sglang.memory import engine_kv_dtype, sglang_memory
from servelab.engines.sglang.releases import parse_release
from servelab.engines.sglang.settings import SglangFigures, SglangSettings
from servelab.engines.sglang.weights import mxfp4_moe_padding_bytes
from servelab.errors import ConfigError
from servelab.hardware.gpus import GPU
from servelab.model.spec import ModelSpec
from servelab.sizing.fit import EngineFit, PlanSettings, memory_bytes, weight_split


def plan(model: ModelSpec, gpu: GPU, s: PlanSettings[SglangSettings]) -> EngineFit:
    kv_dtype, note = engine_kv_dtype(s.kv_dtype)
    spec = s.speculative
    if spec is not None and spec.method == "mtp" and not model.mtp_layers:
        raise ConfigError(f"{model.name} has no MTP layers for sglang's NEXTN; use eagle, ngram or draft")
    text, vision, mtp = weight_split(model, s.tp, vision=True, mtp=False, speculative=spec)
    text += mxfp4_moe_padding_bytes(model, gpu, tp=s.tp)
    running = s.parallel if s.parallel > 1 else None
    free = gpu.memory_bytes - gpu.runtime_context_bytes
    m = sglang_memory(
        model,
        gpu_memory_bytes=gpu.memory_bytes,
        free_memory_bytes=free,
        weights_bytes=text + vision + mtp,
        tp=s.tp,
        kv_cache_dtype=kv_dtype,
        context_length=s.context,
        max_total_tokens=s.engine.max_total_tokens,
        mem_fraction_static=s.engine.mem_fraction_static,
        max_running_requests=running,
        max_mamba_cache_size=s.engine.max_mamba_cache_size,
        disable_radix_cache=s.engine.disable_radix_cache,
        chunked_prefill_size=s.engine.chunked_prefill_size,
        speculative_draft_layers=spec.draft_attention_layers(model) if spec else 0,
        speculative=spec is not None,
        release=parse_release(s.engine_version),
        cuda=gpu.compute_capability is not None,
        rocm=gpu.is_rocm,
        attention_backend=s.engine.attention_backend,
    )
    activations = max(0, free - int(m.mem_fraction_static * free))
    memory = memory_bytes(
        gpu, text, vision, mtp, m.kv_pool_bytes, m.mamba_pool_bytes, activations, gpu.runtime_context_bytes
    )
    served = m.max_req_len + 1 if m.max_req_len else 0
    argv = cmdline.command(
        s.model_path,
        quant=model.quant,
        context_length=s.context,
        kv_cache_dtype=kv_dtype,
        tp=s.tp,
        max_total_tokens=s.engine.max_total_tokens,
        mem_fraction_static=s.engine.mem_fraction_static,
        max_running_requests=running,
        max_mamba_cache_size=s.engine.max_mamba_cache_size,
        attention_backend=s.engine.attention_backend,
        speculative=spec,
        own=s.engine,
        host=s.host,
        port=s.port or DEFAULT_PORT,
    )
    figures = SglangFigures(
        mem_fraction_static=m.mem_fraction_static,
        max_total_tokens=m.max_total_tokens,
        max_req_len=m.max_req_len,
        max_running_requests=m.max_running_requests,
        chunked_prefill_size=m.chunked_prefill_size,
        cuda_graph_max_bs=m.cuda_graph_max_bs,
        mamba_cache_size=m.mamba_cache_size,
        kv_cell_bytes=m.kv_cell_bytes,
        mamba_state_bytes_per_request=m.mamba_state_bytes_per_request,
        ep_size=s.engine.ep_size,
        disable_cuda_graph=s.engine.disable_cuda_graph or None,
    )
    max_batch = max(1, min(m.max_running_requests, m.max_total_tokens // 1024 if m.max_total_tokens else 1))
    return EngineFit(
        memory=memory,
        fits=m.fits,
        context_served=served,
        slots=m.max_running_requests,
        kv_dtype=kv_dtype,
        figures=figures,
        argv=argv,
        warnings=[w for w in (note, *m.warnings) if w],
        max_batch=max_batch,
        refusals=m.refusals,
    )

"""vLLM's planner adapter: its memory rules (memory.py) for one request, as an EngineFit with its launch words.
Reached through the registry's Planner (engine.py).
"""

from __future__ import annotations

from servelab.engines.vllm import DEFAULT_PORT, cmdline, cpu_planner, profile
from servelab.engines.vllm.memory import engine_kv_dtype, kernel_block_alignment, vllm_memory
from servelab.engines.vllm.settings import VllmFigures, VllmSettings, compilation
from servelab.errors import ConfigError
from servelab.hardware.gpus import GPU
from servelab.model.spec import LayerKind, ModelSpec
from servelab.sizing.fit import EngineFit, PlanSettings, memory_bytes, weight_split


def plan(model: ModelSpec, gpu: GPU, s: PlanSettings[VllmSettings]) -> EngineFit:
    if gpu.is_cpu:
        return cpu_planner.plan(model, gpu, s)
    kv_dtype, note = engine_kv_dtype(s.kv_dtype)
    spec = s.speculative
    if spec is not None and spec.method == "mtp" and not model.mtp_layers:
        raise ConfigError(
            f"{model.name} has no MTP layers: vLLM's method mtp needs them; use eagle, ngram or draft"
        )
    text, vision, mtp = weight_split(model, s.tp, vision=True, mtp=False, speculative=spec)
    if profile.marlin_mxfp4(gpu.compute_capability, profile.parse_version(s.engine_version)):
        text += profile.marlin_padding_bytes(model, s.tp)
    align = kernel_block_alignment(
        gpu.compute_capability, model.attention.head_dim if model.attention else 0, mla=model.mla is not None
    )
    util = 0.9 if s.engine.gpu_memory_utilization is None else s.engine.gpu_memory_utilization
    asked_seqs = s.engine.max_num_seqs or (s.parallel if s.parallel > 1 else None)
    m = vllm_memory(
        model,
        gpu_memory_bytes=gpu.cuda_memory_bytes,
        free_memory_bytes=gpu.cuda_memory_bytes - gpu.runtime_context_bytes,
        weights_bytes=text + vision + mtp,
        tp=s.tp,
        gpu_memory_utilization=util,
        max_model_len=s.context,
        max_num_seqs=asked_seqs,
        max_num_batched_tokens=s.engine.max_num_batched_tokens,
        kv_cache_memory_bytes=s.engine.kv_cache_memory_bytes,
        kv_cache_dtype=kv_dtype,
        block_align=align,
        speculative_tokens=spec.num_tokens if spec else 0,
        speculative_method=spec.method if spec else None,
        draft_layers=spec.draft_attention_layers(model) if spec else 0,
        enable_prefix_caching=bool(s.engine.enable_prefix_caching),
        enforce_eager=s.engine.enforce_eager,
        compilation=compilation(s.engine),
        version=s.engine_version,
        device_name=gpu.label,
        compute_capability=gpu.compute_capability,
        attention_backend=s.engine.attention_backend,
        multimodal=not s.engine.language_model_only,
        use_v1=s.engine.use_v1,
    )
    seqs = m.max_num_seqs
    pool = m.num_blocks * m.page_bytes * m.group_size
    recurrent_layers = model.count(LayerKind.LINEAR_ATTENTION) + model.count(LayerKind.MAMBA)
    mamba_groups = -(-recurrent_layers // m.group_size) if recurrent_layers else 0
    state = pool * mamba_groups // max(1, m.num_groups)  # the pool's layer-proportional share
    memory = memory_bytes(
        gpu,
        text,
        vision,
        mtp,
        pool - state,
        state,
        m.activation_bytes + m.cuda_graph_bytes,
        m.non_torch_bytes + gpu.runtime_context_bytes,
    )
    argv = cmdline.command(
        s.model_path,
        quant=model.quant,
        max_model_len=s.context,
        kv_cache_dtype=kv_dtype,
        tp=s.tp,
        gpu_memory_utilization=s.engine.gpu_memory_utilization,
        max_num_seqs=asked_seqs,
        max_num_batched_tokens=s.engine.max_num_batched_tokens,
        kv_cache_memory_bytes=s.engine.kv_cache_memory_bytes,
        speculative=spec,
        speculative_text=s.engine.speculative_config,
        enable_prefix_caching=s.engine.enable_prefix_caching,
        language_model_only=s.engine.language_model_only,
        enforce_eager=s.engine.enforce_eager,
        enable_expert_parallel=s.engine.enable_expert_parallel,
        compilation_config=s.engine.compilation_config,
        attention_backend=s.engine.attention_backend,
        host=s.host,
        port=s.port or DEFAULT_PORT,
    )
    figures = VllmFigures(
        gpu_memory_utilization=util,
        kv_budget_bytes=m.kv_budget_bytes,
        block_size=m.block_size,
        num_blocks=m.num_blocks,
        kv_tokens=m.kv_tokens,
        padding_layers=m.padding_layers,
        max_concurrency=round(m.max_concurrency, 2),
        max_num_seqs=seqs,
        max_num_batched_tokens=m.max_num_batched_tokens,
        estimated_max_model_len=m.estimated_max_model_len,
        mamba_blocks=m.mamba_blocks,
        enforce_eager=s.engine.enforce_eager or None,
        cuda_graph_bytes=m.cuda_graph_bytes,
        enable_expert_parallel=s.engine.enable_expert_parallel or None,
    )
    return EngineFit(
        memory=memory,
        fits=m.fits,
        context_served=m.estimated_max_model_len,
        slots=seqs,
        kv_dtype=kv_dtype,
        figures=figures,
        argv=argv,
        warnings=[w for w in (note, *m.warnings) if w],
        max_batch=max(1, min(seqs, int(m.max_concurrency * 8) or 1)),
        refusals=m.refusals,
    )

"""llama.cpp planned on the CPU device (-ngl 0): weights, the KV cache, recurrent state, the host compute buffer and
the output buffer all in host RAM, against the machine's memory. memory.py's rules, as the GPU adapter uses them."""

from __future__ import annotations

from servelab.engines.llamacpp import cmdline
from servelab.engines.llamacpp.builds import fa_mask_keeps_f32, parse_build, reserved_outputs
from servelab.engines.llamacpp.memory import DEFAULT_N_BATCH, engine_kv_dtype, flash_attn_on, llamacpp_memory
from servelab.engines.llamacpp.settings import LlamaCppFigures, LlamaCppSettings
from servelab.errors import ConfigError
from servelab.hardware.gpus import GPU
from servelab.model.spec import ModelSpec
from servelab.sizing.fit import EngineFit, PlanSettings, memory_bytes


def plan(model: ModelSpec, gpu: GPU, s: PlanSettings[LlamaCppSettings]) -> EngineFit:
    if s.tp > 1:
        raise ConfigError("llama.cpp on CPU: plan one CPU device (--gpus 1)")
    cache_type, note = engine_kv_dtype(s.kv_dtype)
    cache_v, note_v = engine_kv_dtype(s.engine.kv_dtype_v) if s.engine.kv_dtype_v else (cache_type, None)
    n_ctx = s.context if s.engine.kv_unified else s.context * s.parallel
    m = llamacpp_memory(
        model,
        n_ctx=n_ctx,
        n_parallel=s.parallel,
        kv_unified=s.engine.kv_unified,
        cache_type_k=cache_type,
        cache_type_v=cache_v,
        flash_attn=flash_attn_on(s.engine.flash_attn),
        n_gpu_layers=0,
        n_outputs_max=reserved_outputs(parse_build(s.engine_version), DEFAULT_N_BATCH),
        fa_mask_f32=fa_mask_keeps_f32(parse_build(s.engine_version)),
    )
    buffers = m.compute_bytes + m.output_bytes  # with -ngl 0 both are host buffers
    memory = memory_bytes(gpu, m.model_bytes, 0, 0, m.kv_bytes, m.recurrent_bytes, buffers, 0)
    fits = memory.total <= gpu.memory_bytes and m.n_ctx_per_slot >= s.context
    warnings = [w for w in (note, note_v, *m.warnings) if w]
    if memory.total > gpu.memory_bytes:
        warnings.append(
            f"llama.cpp on CPU: needs {memory.total / 2**30:.2f} GiB, more than the"
            f" {gpu.memory_bytes / 2**30:.2f} GiB of host memory; lower -c / -np or pick a smaller quant"
        )
    argv = cmdline.plan_command(
        model, s, n_ctx=m.n_ctx, cache_type_k=cache_type, cache_type_v=cache_v, on_gpu=False
    )
    figures = LlamaCppFigures(
        n_ctx=m.n_ctx,
        n_ctx_per_slot=m.n_ctx_per_slot,
        n_parallel=m.n_parallel,
        kv_unified=m.kv_unified,
        n_gpu_layers=0,
        compute_buffer_bytes=m.compute_bytes,
        output_buffer_bytes=m.output_bytes,
        kv_cells=m.kv_cells,
    )
    return EngineFit(
        memory=memory,
        fits=fits,
        context_served=m.n_ctx_per_slot,
        slots=m.n_parallel,
        kv_dtype=cache_type,
        figures=figures,
        argv=argv,
        warnings=warnings,
        max_batch=m.n_parallel,
        full_context_batch=m.n_parallel,
    )

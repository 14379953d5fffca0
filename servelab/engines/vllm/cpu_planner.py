"""vLLM's CPU backend planned on the CPU device: the KV pool is VLLM_CPU_KVCACHE_SPACE GiB, blocks of 128 tokens
(hybrids: the smallest multiple of 128 whose attention page holds a layer's state, the state padded to it; each
request holds 2 state blocks per mamba group, 3 for Mamba2, as prefix caching's 'align' mode keeps them), weights
and the server's processes in host memory. memory.py's rules, as the GPU adapter (planner.py) uses them;
docs/reference/vllm-cpu.md §3, §8, §11 and vllm/v1/worker/cpu_worker.py.
"""

from __future__ import annotations

from servelab.engines.vllm import DEFAULT_PORT, cmdline
from servelab.engines.vllm.memory import (
    CPU_BLOCK_SIZE,
    CPU_PROCESS_BYTES,
    GIB,
    VllmMemory,
    engine_kv_dtype,
    vllm_memory,
)
from servelab.engines.vllm.settings import VllmFigures, VllmSettings
from servelab.errors import ConfigError
from servelab.hardware.gpus import GPU
from servelab.model.spec import LayerKind, ModelSpec
from servelab.sizing.fit import EngineFit, PlanSettings, memory_bytes, weight_split

DEFAULT_KV_CACHE_SPACE_GIB = (
    1  # what servelab starts vLLM on a CPU with unless told (docs/reference/vllm-cpu.md §3)
)


def _notes(space: int, m: VllmMemory, node_bytes: int, needed: int) -> list[str]:
    notes = [
        f"vLLM on CPU: start it with VLLM_CPU_KVCACHE_SPACE={space} (GiB) in its environment; unset, it reserves"
        " --gpu-memory-utilization of the NUMA node and may refuse to start"
    ]
    if needed > node_bytes:
        notes.append(
            f"vLLM on CPU: {needed / GIB:.2f} GiB (KV {space} GiB, weights, its processes) exceeds the NUMA node's"
            f" {node_bytes / GIB:.2f} GiB; lower VLLM_CPU_KVCACHE_SPACE"
        )
    return notes + list(m.warnings)


def plan(model: ModelSpec, gpu: GPU, s: PlanSettings[VllmSettings]) -> EngineFit:
    if gpu.cpu is None:
        raise ConfigError("the vLLM CPU planner needs the CPU device (--gpu cpu)")
    if s.tp > 1:
        raise ConfigError("vLLM on CPU: plan one CPU device (--gpus 1)")
    space = s.engine.kv_cache_space_gib or DEFAULT_KV_CACHE_SPACE_GIB
    kv_dtype, note = engine_kv_dtype(s.kv_dtype)
    text, vision, mtp = weight_split(model, 1, vision=True, mtp=False)
    m = vllm_memory(
        model,
        gpu_memory_bytes=gpu.cpu.numa_node_memory_bytes,
        weights_bytes=text + vision,
        max_model_len=s.context,
        max_num_seqs=s.parallel if s.parallel > 1 else None,
        kv_cache_dtype=kv_dtype,
        enforce_eager=True,  # no CUDA graphs on a CPU
        kv_cache_memory_bytes=space * GIB,
        default_block_size=CPU_BLOCK_SIZE,
        block_align=CPU_BLOCK_SIZE,  # the platform's 128 is set before the hybrid alignment reads it
        enable_prefix_caching=True,  # on by default in vLLM CPU 0.32: mamba_cache_mode 'align'
    )
    seqs = min(m.max_num_seqs, m.mamba_blocks) if m.mamba_blocks else m.max_num_seqs
    pool = m.num_blocks * m.page_bytes * m.group_size
    recurrent = model.count(LayerKind.LINEAR_ATTENTION) + model.count(LayerKind.MAMBA)
    state = pool * (-(-recurrent // m.group_size) if recurrent else 0) // max(1, m.num_groups)
    memory = memory_bytes(gpu, text, vision, mtp, pool - state, state, m.activation_bytes, CPU_PROCESS_BYTES)
    node = gpu.cpu.numa_node_memory_bytes
    argv = cmdline.command(
        s.model_path,
        quant=model.quant,
        max_model_len=s.context,
        kv_cache_dtype=kv_dtype,
        max_num_seqs=seqs if seqs != m.max_num_seqs or s.parallel > 1 else None,
        host=s.host,
        port=s.port or DEFAULT_PORT,
    )
    figures = VllmFigures(
        kv_cache_space_gib=space,
        numa_node_bytes=node,
        block_size=m.block_size,
        num_blocks=m.num_blocks,
        kv_tokens=m.kv_tokens,
        padding_layers=m.padding_layers,
        mamba_padding_pct=round(m.mamba_padding_pct, 2),
        max_concurrency=round(m.max_concurrency, 2),
        max_num_seqs=seqs,
        estimated_max_model_len=m.estimated_max_model_len,
        mamba_blocks=m.mamba_blocks,
    )
    fits = m.fits and memory.total <= node and s.context <= model.max_context
    warnings = [w for w in (note, *_notes(space, m, node, memory.total)) if w]
    max_batch = max(1, min(seqs, int(m.max_concurrency * 8) or 1))
    return EngineFit(
        memory=memory,
        fits=fits,
        context_served=m.estimated_max_model_len,
        slots=seqs,
        kv_dtype=kv_dtype,
        figures=figures,
        argv=argv,
        warnings=warnings,
        max_batch=max_batch,
    )

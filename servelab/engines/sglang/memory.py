"""How sglang sizes its memory: --mem-fraction-static, the KV token pool, the linear-attention (mamba) state pool.

Rules (sgl-project/sglang python/sglang/srt/server_args.py `_handle_gpu_memory_settings`,
mem_cache/kv_cache_configurator.py, managers/utils.py; docs/reference/memory.md §2):
- mem_fraction_static default = round((gpu_mib - reserved) / gpu_mib, 3) with reserved = 512 + max(chunked, 2048)
  x 1.5 + cuda_graph_max_bs x 2 + tp/8 x 1024 MiB (at least 10240 above 60 GiB; + 2048 with EAGLE/MTP), from
  release 0.5.3; the older releases' defaults in releases.py.
- budget for pools = mfs x free_before_load - weights.
- hybrid linear attention: mamba pool = budget x r / (1 + r) (r = --mamba-full-memory-ratio, 0.9) // per-request
  state, unless --max-mamba-cache-size; the KV pool gets the rest.
- max_total_num_tokens = KV budget // cell_size (then min with --max-total-tokens); cell_size is per GPU
  (max(1, n_kv // tp) heads per layer) and counts only the full-attention layers (+ draft layers with MTP); sliding layers at swa_full_tokens_ratio (0.8).
- max_running_requests = min(clamp(tokens / context x 512, 2048, 4096), tokens // 2), and for hybrids
  <= mamba slots // 3 (radix cache on); max_req_len = min(context - 1, tokens - 1).
"""

from __future__ import annotations

from dataclasses import dataclass

from servelab.engines.sglang.releases import (
    Release,
    aiter_fraction_factor,
    default_attention_backend_rocm,
    release_mem_fraction_static,
)
from servelab.errors import ConfigError
from servelab.model.dtypes import AUTO, engine_spelling, storage_dtype
from servelab.model.spec import ModelSpec
from servelab.sizing.fit import Refusal
from servelab.sizing.kv import kv_layout
from servelab.sizing.state import state_layout

MIB = 1024**2
GIB_MIB = 1024
# --kv-cache-dtype spelling -> canonical dtype (servelab.model.dtypes)
KV_DTYPES = {"auto": AUTO, "bf16": "bf16", "fp16": "fp16", "fp8_e5m2": "fp8_e5m2", "fp8_e4m3": "fp8_e4m3"}
SWA_FULL_TOKENS_RATIO = 0.8
MAMBA_FULL_MEMORY_RATIO = 0.9
MAMBA_SLOTS_PER_REQUEST = 3  # MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO with the radix cache on


@dataclass(frozen=True, kw_only=True)
class SglangMemory:
    mem_fraction_static: float
    chunked_prefill_size: int
    cuda_graph_max_bs: int
    reserved_bytes: int  # what the default formula keeps outside the static pools
    weights_bytes: int  # per GPU
    pool_budget_bytes: int  # mfs x free - weights: shared by the KV pool and the mamba pool
    kv_cell_bytes: int  # one token across every KV layer
    max_total_tokens: int  # the token capacity sglang allocates
    kv_pool_bytes: int
    mamba_cache_size: int  # state slots
    mamba_state_bytes_per_request: int
    mamba_pool_bytes: int
    context_length: int
    max_running_requests: int
    max_req_len: int  # longest request (prompt + output) sglang accepts
    warnings: tuple[str, ...] = ()
    refusals: tuple[Refusal, ...] = ()  # sglang will not start, or not serve context_length

    @property
    def fits(self) -> bool:
        return not self.refusals


def tier(gpu_mib: float, tp: int) -> tuple[int, int]:
    """(chunked_prefill_size, cuda_graph_max_bs) sglang picks for this much GPU memory."""
    small_tp = tp < 4
    gib = gpu_mib / GIB_MIB
    if gib < 20:
        return 2048, 8
    if gib < 35:
        return 2048, 24 if small_tp else 80
    if gib < 60:
        return 4096, 32 if small_tp else 160
    if gib < 160:
        return 8192, 256 if small_tp else 512
    return 16384, 512


def default_mem_fraction_static(
    gpu_mib: float,
    *,
    tp: int = 1,
    speculative: bool = False,
    chunked_prefill_size: int | None = None,
    release: Release | None = None,
    cuda: bool = True,
) -> tuple[float, int]:
    """(mem_fraction_static, reserved MiB) from sglang's default formula; `release` (None: the current) picks
    an older release's rule (releases.py), `cuda` False for ROCm cards."""
    older = None
    if release is not None:
        older = release_mem_fraction_static(release, gpu_mib, tp=tp, speculative=speculative, cuda=cuda)
    if older is not None:
        return older, int(gpu_mib * (1 - older))
    chunk, graph_bs = tier(gpu_mib, tp)
    chunk = chunked_prefill_size or chunk
    reserved = 512 + max(chunk, 2048) * 1.5 + graph_bs * 2 + tp / 8 * 1024
    if gpu_mib > 60 * GIB_MIB:
        reserved = max(reserved, 10240)
    if speculative:
        reserved += 2048
    return round((gpu_mib - reserved) / gpu_mib, 3), int(reserved)


def _kv_dtype(model: ModelSpec, kv_dtype: str) -> str:
    if kv_dtype not in KV_DTYPES:
        raise ConfigError(
            f"sglang --kv-cache-dtype {kv_dtype!r} is not supported; choose one of: {', '.join(KV_DTYPES)}"
        )
    return storage_dtype(kv_dtype, model.dtype)


def _cell_bytes(model: ModelSpec, dtype: str, draft_layers: int, tp: int) -> int:
    """One token's KV bytes on one GPU: get_num_kv_heads(attn_tp) = max(1, n_kv // tp) heads per layer (the
    heads replicated when fewer than the GPUs), MLA's latent whole on every rank (docs/reference/memory.md §2)."""
    layout = kv_layout(model, dtype, extra_full_layers=draft_layers, tp=tp)
    return layout.full_bytes_per_token + int(SWA_FULL_TOKENS_RATIO * layout.sliding_bytes_per_token)


def _mamba_pool(
    budget: int,
    per_request: int,
    *,
    max_mamba_cache_size: int | None,
    ratio: float,
    running_requests: int | None,
) -> int:
    """How many state slots sglang reserves (kv_cache_configurator._handle_max_mamba_cache)."""
    if per_request == 0:
        return 0
    if max_mamba_cache_size is not None:
        return max_mamba_cache_size
    if running_requests is not None:
        return running_requests
    return int(budget * ratio / (1 + ratio)) // per_request


def _running_requests(tokens: int, context: int, mamba_slots: int, per_request: int, radix: bool) -> int:
    running = min(max(int(tokens / max(1, context) * 512), 2048), 4096)
    running = min(running, tokens // 2)
    if per_request:
        running = min(running, mamba_slots // (MAMBA_SLOTS_PER_REQUEST if radix else 1))
    return max(0, running)


def _context_refusals(model: ModelSpec, context: int) -> list[Refusal]:
    if context <= model.max_context:
        return []
    return [
        Refusal(
            f"sglang: --context-length {context} exceeds the model's {model.max_context}; sglang refuses it"
            f" unless SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1: pass --context-length {model.max_context}"
        )
    ]


@dataclass(frozen=True)
class _Pools:
    """What the pool checks read (bytes per GPU)."""

    budget: int
    cell: int
    tokens: int
    per_request: int  # one request's linear-attention state; 0 for models without one
    slots: int
    running: int


def _pool_refusals(p: _Pools, context: int, parallel: int, mfs: float) -> list[Refusal]:
    """sglang's start-up refusals (model_runner.py / kv_cache_configurator.py: "Not enough memory. Please try to
    increase --mem-fraction-static." when the pools get no bytes), and a KV pool smaller than one request of
    --context-length: sglang starts but caps every request at max_total_tokens - 1 (managers/utils.py), so the
    asked context is not served. For hybrids the fix is --max-mamba-cache-size: fewer state slots, more KV."""
    if p.budget <= 0 or p.tokens <= 0:
        return [
            Refusal(
                f"sglang: weights leave no GPU memory for the KV cache under --mem-fraction-static={mfs}"
                " ('Not enough memory. Please try to increase --mem-fraction-static.'); raise"
                " --mem-fraction-static, pick a smaller --quant or add GPUs (--tp)"
            )
        ]
    out = []
    if p.tokens < context:
        fix: dict[str, object] = {}
        hint = "--kv-cache-dtype fp8_e5m2, a higher --mem-fraction-static or a shorter --context-length"
        if p.per_request:
            most = (p.budget - context * p.cell) // p.per_request  # slots that leave `context` KV tokens
            if most >= MAMBA_SLOTS_PER_REQUEST * max(1, parallel):
                fix = {"max_mamba_cache_size": min(most, p.slots)}
                hint = f"--max-mamba-cache-size {fix['max_mamba_cache_size']}, or " + hint
        out.append(
            Refusal(
                f"sglang: the KV pool holds {p.tokens} tokens, fewer than --context-length {context}: requests"
                f" are capped at {p.tokens - 1} tokens; pass {hint}",
                fix,
            )
        )
    if p.per_request and p.running < 1:
        out.append(
            Refusal(
                f"sglang: {p.slots} linear-attention state slots leave no running request (max_running_requests"
                f" = slots // {MAMBA_SLOTS_PER_REQUEST}); pass --max-mamba-cache-size"
                f" {MAMBA_SLOTS_PER_REQUEST * max(1, parallel)} or more"
            )
        )
    return out


def _pool_warnings(state_bytes: int, slots: int, ratio: float) -> list[str]:
    """What the state pool silently takes (the auto --mamba-full-memory-ratio share)."""
    if not state_bytes:
        return []
    return [
        f"sglang: the linear-attention state pool takes {state_bytes / 2**30:.1f} GiB for {slots}"
        f" slots (--mamba-full-memory-ratio {ratio}); --max-mamba-cache-size N frees it for KV tokens"
    ]


def _aiter_factor(
    model: ModelSpec, release: Release | None, rocm: bool, backend: str | None, context: int, tp: int
) -> float:
    """mem_fraction_static's ROCm factor for this model's attention backend (the given one, else sglang's
    default: aiter for MHA, for MLA only at 16 or 128 KV heads per GPU)."""
    if not rocm:
        return 1.0
    if backend is None:
        heads = max(1, model.attention.num_kv_heads // tp) if model.attention else 0
        backend = default_attention_backend_rocm(mla=model.mla is not None, kv_heads_per_gpu=heads)
    return aiter_fraction_factor(release, rocm=rocm, attention_backend=backend, context_len=context)


def sglang_memory(
    model: ModelSpec,
    *,
    gpu_memory_bytes: int,
    free_memory_bytes: int | None = None,
    weights_bytes: int,
    tp: int = 1,
    kv_cache_dtype: str = "auto",
    context_length: int | None = None,
    max_total_tokens: int | None = None,
    mem_fraction_static: float | None = None,
    chunked_prefill_size: int | None = None,
    mamba_full_memory_ratio: float = MAMBA_FULL_MEMORY_RATIO,
    max_mamba_cache_size: int | None = None,
    max_running_requests: int | None = None,
    disable_radix_cache: bool = False,
    speculative_draft_layers: int = 0,
    speculative: bool = False,
    release: Release | None = None,
    cuda: bool = True,
    rocm: bool = False,
    attention_backend: str | None = None,
) -> SglangMemory:
    """What sglang would allocate on each GPU. `weights_bytes` is the per-GPU share (weights / tp);
    `free_memory_bytes` is what is free before loading (total minus the CUDA context, by default); `release`
    (None: the current) the sglang release whose default mem_fraction_static applies, `cuda` False off CUDA,
    `rocm` True on an AMD card, where `attention_backend` (None: sglang's default for the model) aiter scales
    the fraction down above 8192 tokens of context (releases.py `aiter_fraction_factor`)."""
    gpu_mib = gpu_memory_bytes / MIB
    chunk, graph_bs = tier(gpu_mib, tp)
    chunk = chunked_prefill_size or chunk
    default_mfs, reserved_mib = default_mem_fraction_static(
        gpu_mib,
        tp=tp,
        speculative=speculative or speculative_draft_layers > 0,
        chunked_prefill_size=chunk,
        release=release,
        cuda=cuda,
    )
    mfs = mem_fraction_static if mem_fraction_static is not None else default_mfs
    if not 0 < mfs <= 1:
        raise ConfigError(f"sglang --mem-fraction-static must be in (0, 1], got {mfs}")
    context = context_length or model.max_context
    mfs *= _aiter_factor(model, release, rocm, attention_backend, context, tp)
    for flag, value in (
        ("--max-total-tokens", max_total_tokens),
        ("--max-mamba-cache-size", max_mamba_cache_size),
    ):
        if value is not None and value < 1:
            raise ConfigError(f"sglang {flag} must be at least 1, got {value}")
    warnings: list[str] = []
    refusals = _context_refusals(model, context)
    free = free_memory_bytes if free_memory_bytes is not None else gpu_memory_bytes
    budget = int(mfs * free) - weights_bytes
    cell = _cell_bytes(model, _kv_dtype(model, kv_cache_dtype), speculative_draft_layers, tp)
    per_req = state_layout(model).bytes_per_sequence // max(1, tp)
    running_hint = max_running_requests if disable_radix_cache else None
    slots = _mamba_pool(
        max(0, budget),
        per_req,
        max_mamba_cache_size=max_mamba_cache_size,
        ratio=mamba_full_memory_ratio,
        running_requests=running_hint,
    )
    kv_budget = max(0, budget - slots * per_req)
    tokens = kv_budget // cell if cell else 0
    if max_total_tokens is not None:
        if max_total_tokens > tokens:
            warnings.append(
                f"sglang: --max-total-tokens {max_total_tokens} is larger than the profiled {tokens};"
                " sglang uses the profiled value"
            )
        tokens = min(tokens, max_total_tokens)
    running = _running_requests(tokens, context, slots, per_req, not disable_radix_cache)
    if max_running_requests is not None:
        running = min(running, max_running_requests) if running else max_running_requests
    max_req_len = max(0, min(context - 1, tokens - 1))
    auto_state = slots * per_req if max_mamba_cache_size is None else 0
    warnings += _pool_warnings(auto_state, slots, mamba_full_memory_ratio)
    pools = _Pools(budget, cell, tokens, per_req, slots, running)
    refusals += _pool_refusals(pools, context, max_running_requests or 1, mfs)
    return SglangMemory(
        mem_fraction_static=mfs,
        chunked_prefill_size=chunk,
        cuda_graph_max_bs=graph_bs,
        reserved_bytes=reserved_mib * MIB,
        weights_bytes=weights_bytes,
        pool_budget_bytes=budget,
        kv_cell_bytes=cell,
        max_total_tokens=tokens,
        kv_pool_bytes=tokens * cell,
        mamba_cache_size=slots,
        mamba_state_bytes_per_request=per_req,
        mamba_pool_bytes=slots * per_req,
        context_length=context,
        max_running_requests=running,
        max_req_len=max_req_len,
        warnings=tuple(warnings),
        refusals=tuple(refusals),
    )


def engine_kv_dtype(requested: str | None) -> tuple[str, str | None]:
    """sglang's --kv-cache-dtype for a requested KV dtype, and a note when it had to substitute one."""
    value = (requested or AUTO).lower()
    found = engine_spelling(value, KV_DTYPES)
    if found:
        return found, None
    if value.startswith(("q8", "q4", "q5", "iq4")):
        return "fp8_e4m3", f"sglang has no {requested} KV cache; fp8_e4m3 (1 byte) is the closest"
    raise ConfigError(
        f"sglang --kv-cache-dtype {requested!r} is not supported; choose one of: {', '.join(KV_DTYPES)}"
    )

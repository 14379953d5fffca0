"""How llama.cpp (llama-server) allocates memory, buffer by buffer, as its log reports it.

Rules (llama.cpp src/llama-context.cpp, llama-kv-cache*.cpp, llama-memory-recurrent.cpp, llama-model.cpp
create_memory, tools/server/server.cpp; docs/reference/memory.md §4):
- -c 0 means n_ctx_train; n_ctx = pad(n_ctx, 256). Unified: every slot may use n_ctx cells of one shared pool.
  Otherwise n_ctx_seq = pad(n_ctx / n_seq_max, 256) and n_ctx = n_ctx_seq x n_seq_max. Either way the KV buffer
  holds n_ctx cells. -np -1 (auto) = 4 slots with a unified cache.
- A slot's window is min(n_ctx_seq, n_ctx_train) (server n_ctx_slot()).
- KV rows per full-attention layer: row(type_k, n_kv x head_k) + row(type_v, n_kv x head_v); MLA keeps K only.
  Sliding layers keep pad(min(n_ctx_seq, n_swa x (unified ? n_seq : 1) + n_ubatch), 256) cells per stream.
- Recurrent state: R = (K-1) x conv_dim and S = ssm elements, both f32, per layer, x max(1, n_seq_max) x (1+n_rs_seq).
- Output buffer: n_vocab x max(n_seq_max, 1) f32 logits. Quantised V needs flash attention.
- Compute buffer: the worst-case ubatch graph (compute.py), sized by n_ubatch (-ub) and n_batch (-b): n_tokens =
  min(n_ctx, n_ubatch, n_batch); f32 attention scores over n_ctx_seq cells without flash attention. Several GPUs
  with every layer offloaded and no tensor override (-ot, --n-cpu-moe) run a pipeline: 4 input copies each.
- Weights: the GGUF's tensors; a vision tower is a separate mmproj file llama-server loads only with --mmproj.
- MoE experts in host RAM: --n-cpu-moe N keeps the routed experts (the ffn_*_exps tensors) of the first N layers
  on the CPU, --cpu-moe / -ot exps=CPU those of every layer (common/arg.cpp); shared experts, attention and
  norms stay on the GPU. The moved bytes leave the GPU's model buffer and join the host's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from servelab.engines.llamacpp.compute import SCHED_MAX_COPIES, compute_bytes
from servelab.errors import ConfigError
from servelab.model.dtypes import AUTO, engine_spelling, row_bytes
from servelab.model.spec import RECURRENT_KINDS, LayerKind, ModelSpec
from servelab.sizing.kv import layer_kv_bytes_per_token
from servelab.sizing.state import state_layout
from servelab.sizing.weights import weight_bytes

# --cache-type-k/-v spelling -> canonical dtype (servelab.model.dtypes)
CACHE_TYPES = {
    "f32": "fp32",
    "f16": "fp16",
    "bf16": "bf16",
    "q8_0": "q8_0",
    "q4_0": "q4_0",
    "q4_1": "q4_1",
    "iq4_nl": "iq4_nl",
    "q5_0": "q5_0",
    "q5_1": "q5_1",
}
PAD = 256
AUTO_PARALLEL = 4

DEFAULT_N_BATCH = 2048  # -b


def pad(n: int, to: int = PAD) -> int:
    return (n + to - 1) // to * to


@dataclass(frozen=True, kw_only=True)
class LlamaCppMemory:
    """What llama-server would allocate; byte fields match its log lines (model/KV/RS/compute/output buffer)."""

    n_ctx: int  # padded and rounded, as `llama_context: n_ctx = ...` logs it
    n_ctx_seq: int  # cells one stream holds (`n_ctx_seq = ...`)
    n_ctx_per_slot: int  # what /props reports as n_ctx: n_ctx_seq capped at n_ctx_train
    n_parallel: int
    kv_unified: bool
    flash_attn: bool
    n_gpu_layers: int  # repeating layers on the GPU (0: CPU only)
    output_on_gpu: bool
    model_bytes: int  # all tensor data (`model buffer size`, summed over devices)
    model_gpu_bytes: int
    kv_bytes: int  # `KV buffer size`, all layers
    kv_gpu_bytes: int
    kv_cells: int  # cells per stream, as `llama_kv_cache: size = ... (N cells, ...)`
    recurrent_bytes: int  # `RS buffer size`
    recurrent_gpu_bytes: int
    compute_bytes: int  # `compute buffer size` (estimate)
    output_bytes: int  # `output buffer size` (host)
    warnings: tuple[str, ...] = ()

    experts_host_bytes: int = 0  # routed-expert weights kept in host RAM (--n-cpu-moe / -ot exps=CPU)

    @property
    def compute_on_gpu(self) -> bool:
        """The compute buffer is on the device when any layer (the output layer included) is."""
        return bool(self.n_gpu_layers or self.output_on_gpu)

    @property
    def gpu_bytes(self) -> int:
        """Device memory llama.cpp itself allocates (CUDA context not included)."""
        compute = self.compute_bytes if self.compute_on_gpu else 0
        return self.model_gpu_bytes + self.kv_gpu_bytes + self.recurrent_gpu_bytes + compute

    @property
    def host_bytes(self) -> int:
        host_compute = 0 if self.compute_on_gpu else self.compute_bytes
        return (
            self.model_bytes
            - self.model_gpu_bytes
            + self.kv_bytes
            - self.kv_gpu_bytes
            + self.recurrent_bytes
            - self.recurrent_gpu_bytes
            + host_compute
            + self.output_bytes
        )


def _context(model: ModelSpec, n_ctx: int, n_seq: int, unified: bool) -> tuple[int, int, list[str]]:
    """(n_ctx, n_ctx_seq, warnings) after llama_context's padding and rounding."""
    warnings: list[str] = []
    asked = n_ctx or model.max_context
    n_ctx = pad(asked)
    if unified:
        return n_ctx, n_ctx, warnings
    n_ctx_seq = pad(n_ctx // n_seq)
    if n_ctx_seq * n_seq != n_ctx:
        n_ctx = n_ctx_seq * n_seq
        warnings.append(f"llama.cpp: n_ctx is not divisible by -np {n_seq}: rounded to {n_ctx}")
    if n_seq > 1:
        warnings.append(
            f"llama.cpp: -c {asked} with -np {n_seq} and no --kv-unified gives each slot {n_ctx_seq} tokens"
            " (a 1/np share); add --kv-unified to let any slot use the whole pool"
        )
    return n_ctx, n_ctx_seq, warnings


FLASH_ATTN_MODES = ("on", "off", "auto")


def flash_attn_on(mode: str | None) -> bool:
    """-fa on/off/auto as planned: auto (llama-server's default) resolves at start-up, per device, to on where
    the backend runs the flash-attention op for the model's head size (llama_context `resolve(
    llm_fused_op_flash_attn_probe)`: "Flash Attention was auto, set to enabled"), as CUDA, Metal and the CPU do."""
    value = (mode or "on").lower()
    if value not in FLASH_ATTN_MODES:
        raise ConfigError(
            f"llama.cpp -fa {mode!r} is not a mode; choose one of: {', '.join(FLASH_ATTN_MODES)}"
        )
    return value != "off"


def _check_cache_types(cache_type_k: str, cache_type_v: str, flash_attn: bool) -> None:
    for name, value in (("--cache-type-k", cache_type_k), ("--cache-type-v", cache_type_v)):
        if value.lower() not in CACHE_TYPES:
            raise ConfigError(
                f"llama.cpp {name} {value!r} is not a cache type; choose one of: {', '.join(CACHE_TYPES)}"
            )
    if cache_type_v.lower().startswith(("q", "iq")) and not flash_attn:
        raise ConfigError("llama.cpp: a quantized V cache needs flash attention (-fa on)")


def _kv_row_bytes(model: ModelSpec, layer: int, type_k: str, type_v: str) -> int:
    """Bytes one cell occupies in one layer with separate K and V types."""
    if not layer_kv_bytes_per_token(model, layer, "fp32"):
        return 0
    if model.mla is not None:
        return row_bytes(type_k, model.mla.kv_lora_rank + model.mla.qk_rope_head_dim)
    attn = model.attention
    if attn is None:  # not reached: layer_kv_bytes_per_token is 0 without an attention shape
        return 0
    n_kv = model.kv_heads_per_layer[layer] if model.kv_heads_per_layer else attn.num_kv_heads
    return row_bytes(type_k, n_kv * attn.head_dim) + row_bytes(type_v, n_kv * attn.value_head_dim)


def _swa_cells(model: ModelSpec, n_ctx_seq: int, n_seq: int, unified: bool, n_ubatch: int) -> int:
    window = model.attention.sliding_window if model.attention else None
    if not window:
        return n_ctx_seq
    return pad(min(n_ctx_seq, window * (n_seq if unified else 1) + n_ubatch))


def _kv_split(
    model: ModelSpec, on_gpu: list[bool], cells: tuple[int, int], type_k: str, type_v: str
) -> tuple[int, int]:
    """(all KV bytes, KV bytes on the GPU); cells = (full-layer cells, sliding-layer cells) over all streams."""
    total = gpu = 0
    for layer, kind in enumerate(model.layer_kinds):
        size = cells[kind == LayerKind.SLIDING_ATTENTION] * _kv_row_bytes(model, layer, type_k, type_v)
        total += size
        gpu += size if on_gpu[layer] else 0
    return total, gpu


def _recurrent_split(model: ModelSpec, on_gpu: list[bool], rows: int) -> tuple[int, int]:
    """(all recurrent-state bytes, those on the GPU): f32 R and S rows per recurrent layer."""
    state = state_layout(model, conv_dtype="fp32", ssm_dtype="fp32")
    gpu_layers = sum(1 for i, k in enumerate(model.layer_kinds) if on_gpu[i] and k in RECURRENT_KINDS)
    return state.bytes_per_layer * state.layers * rows, state.bytes_per_layer * gpu_layers * rows


def routed_expert_bytes_per_layer(model: ModelSpec) -> int:
    """Routed-expert bytes of one MoE layer: the body's idle share (total - active bytes) is the routed experts'
    (1 - k/E) share; shared experts are active and stay out. 0 for dense models."""
    if model.moe is None:
        return 0
    idle_share = 1 - model.moe.experts_per_token / model.moe.num_experts
    text = next((g for g in model.weights if g.name == "text"), None)
    if text is None or idle_share <= 0:
        return 0
    if text.active_bytes is not None:
        idle = text.bytes - text.active_bytes
    elif text.active_params is not None and text.params:
        idle = text.bytes * (text.params - text.active_params) // text.params
    else:
        return 0
    layers = model.moe.num_moe_layers or model.num_layers
    return int(idle / idle_share) // max(1, layers)


def _experts_on_host(model: ModelSpec, on_gpu: list[bool], n_cpu_moe: int) -> int:
    """Bytes --n-cpu-moe N moves off the GPU: the routed experts of the MoE layers among the first N on the GPU
    (MoE layers are the last num_moe_layers, DeepSeek-style leading dense layers excluded)."""
    if n_cpu_moe <= 0 or model.moe is None:
        return 0
    first_moe = model.num_layers - (model.moe.num_moe_layers or model.num_layers)
    moved = sum(1 for i in range(first_moe, min(n_cpu_moe, model.num_layers)) if on_gpu[i])
    return moved * routed_expert_bytes_per_layer(model)


def _weights_split(model: ModelSpec, on_gpu: list[bool], *, output_on_gpu: bool) -> tuple[int, int]:
    """(all tensor bytes, bytes on the GPU): repeating layers by -ngl (evenly sized), the output layer (and the
    MTP head) when -ngl exceeds the layer count; token_embd always stays on the host."""
    weights = weight_bytes(model, vision=False)  # the mmproj is its own file (--mmproj), not in the GGUF
    body = weights.text * sum(on_gpu) // max(1, len(on_gpu))
    head = weights.lm_head or (weights.embedding if model.tie_word_embeddings else 0)
    return weights.total, body + ((head + weights.mtp) if output_on_gpu else 0)


def gpu_layers(ngl: int, n_layer: int, *, output_first: bool = True) -> tuple[int, bool]:
    """(repeating layers on the GPU, output layer on the GPU) for `-ngl ngl` (0..n_layer + 1). Builds from b7470
    (ggml-org/llama.cpp PR #18148 "llama: offload output layer to GPU first", merged 2025-12-18) count the output
    layer and offload it first: src/llama-model.cpp `i_gpu_start = max(n_layer + 1 - n_gpu_layers, 0)` over the
    n_layer repeating layers and the output layer at index n_layer, so -ngl N puts the output layer and the last
    N - 1 repeating layers on the GPU. Before, -ngl N offloaded the last N repeating layers and the output layer
    only when N > n_layer."""
    if output_first:
        return max(0, min(ngl, n_layer + 1) - 1), ngl >= 1
    return min(ngl, n_layer), ngl > n_layer


def llamacpp_memory(
    model: ModelSpec,
    *,
    n_ctx: int = 0,
    n_parallel: int = -1,
    kv_unified: bool = False,
    cache_type_k: str = "f16",
    cache_type_v: str = "f16",
    n_batch: int = DEFAULT_N_BATCH,
    n_ubatch: int = 512,
    flash_attn: bool = True,
    n_gpu_layers: int | None = None,
    n_rs_seq: int = 0,
    n_cpu_moe: int = 0,
    n_devices: int = 1,
    n_outputs_max: int | None = None,
    fa_mask_f32: bool = False,
    output_first: bool = True,
) -> LlamaCppMemory:
    """llama-server's buffers for these flags. n_parallel -1 is the server's auto (4 slots, unified cache);
    n_gpu_layers None or -1 offloads everything (output layer included), 0 keeps it all on the host;
    n_cpu_moe N keeps the routed experts of the first N layers in host RAM (the layer count: -ot exps=CPU);
    n_devices: the GPUs -sm layer splits the layers over (compute_bytes is then each one's buffer);
    n_outputs_max: the outputs the worst-case graph is reserved with (None: the current llama-server's n_parallel;
    an older build's or another tool's n_ubatch, see compute.py); fa_mask_f32: the build reserves the f32 KQ mask
    beside its f16 cast for flash attention (builds before b9410, builds.py `fa_mask_keeps_f32`); output_first:
    -ngl counts the output layer and offloads it first (builds from b7470, builds.py `output_layer_first`)."""
    for flag, value, least in (("-b", n_batch, 1), ("-ub", n_ubatch, 1), ("--n-cpu-moe", n_cpu_moe, 0)):
        if value < least:
            raise ConfigError(f"llama.cpp {flag} must be at least {least}, got {value}")
    if n_ctx < 0:
        raise ConfigError(
            f"llama.cpp -c must be 0 (the model's {model.max_context}) or positive, got {n_ctx}"
        )
    if n_parallel == -1:
        n_parallel, kv_unified = AUTO_PARALLEL, True
    if n_parallel < 1:
        raise ConfigError(f"llama.cpp -np must be -1 (auto) or at least 1, got {n_parallel}")
    _check_cache_types(cache_type_k, cache_type_v, flash_attn)
    n_ctx, n_ctx_seq, warnings = _context(model, n_ctx, n_parallel, kv_unified)
    n_layer = model.num_layers
    ngl = (
        n_layer + 1 if n_gpu_layers is None or n_gpu_layers < 0 else min(n_gpu_layers, n_layer + 1)
    )  # -1: all
    repeating, output_on_gpu = gpu_layers(ngl, n_layer, output_first=output_first)
    on_gpu = [layer >= n_layer - repeating for layer in range(n_layer)]
    swa_cells = _swa_cells(model, n_ctx_seq, n_parallel, kv_unified, min(n_ubatch, n_batch, n_ctx))
    streams = 1 if kv_unified else n_parallel
    kv_all, kv_gpu = _kv_split(
        model, on_gpu, (n_ctx_seq * streams, swa_cells * streams), cache_type_k, cache_type_v
    )
    recurrent, recurrent_gpu = _recurrent_split(model, on_gpu, max(1, n_parallel) * (1 + n_rs_seq))
    model_bytes, model_gpu = _weights_split(model, on_gpu, output_on_gpu=output_on_gpu)
    experts_host = _experts_on_host(model, on_gpu, n_cpu_moe)
    model_gpu -= experts_host
    n_tokens = min(n_ctx, n_ubatch, n_batch)
    pipeline = (
        n_devices > 1 and ngl > n_layer and n_cpu_moe == 0
    )  # llama_context: "pipeline parallelism enabled"
    compute = compute_bytes(
        model,
        n_tokens=n_tokens,
        n_outputs=min(n_tokens, n_parallel if n_outputs_max is None else max(1, n_outputs_max)),
        n_kv=n_ctx_seq,
        flash_attn=flash_attn,
        pipeline_copies=SCHED_MAX_COPIES if pipeline else 1,
        fa_mask_f32=fa_mask_f32,
    )
    if n_ctx_seq > model.max_context:
        warnings.append(
            f"llama.cpp: the slot context ({n_ctx_seq}) exceeds the training context of the model"
            f" ({model.max_context}) - llama-server caps each slot at {model.max_context}"
        )
    return LlamaCppMemory(
        n_ctx=n_ctx,
        n_ctx_seq=n_ctx_seq,
        n_ctx_per_slot=min(n_ctx_seq, model.max_context),
        n_parallel=n_parallel,
        kv_unified=kv_unified,
        flash_attn=flash_attn,
        n_gpu_layers=repeating,
        output_on_gpu=output_on_gpu,
        model_bytes=model_bytes,
        model_gpu_bytes=model_gpu,
        kv_bytes=kv_all,
        kv_gpu_bytes=kv_gpu,
        kv_cells=n_ctx_seq,
        recurrent_bytes=recurrent,
        recurrent_gpu_bytes=recurrent_gpu,
        compute_bytes=compute,
        output_bytes=model.vocab_size * max(1, n_parallel) * 4,
        warnings=tuple(warnings),
        experts_host_bytes=experts_host,
    )


def max_context_that_fits(model: ModelSpec, budget_bytes: int, **flags: object) -> int:
    """The largest -c (multiple of 256) whose GPU buffers fit in `budget_bytes` (0 when none does)."""
    low, high = 0, math.ceil(model.max_context / PAD)
    while low < high:
        mid = (low + high + 1) // 2
        if llamacpp_memory(model, n_ctx=mid * PAD, **flags).gpu_bytes <= budget_bytes:  # type: ignore[arg-type]
            low = mid
        else:
            high = mid - 1
    return low * PAD


def engine_kv_dtype(requested: str | None) -> tuple[str, str | None]:
    """llama.cpp's cache type for a requested KV dtype, and a note when it had to substitute one."""
    value = (requested or "f16").lower()
    found = engine_spelling("f16" if value == AUTO else value, CACHE_TYPES)
    if found:
        return found, None
    if value.startswith("fp8"):
        return "q8_0", f"llama.cpp has no {requested} cache type; q8_0 (8.5 bits) is the closest"
    raise ConfigError(
        f"llama.cpp cache type {requested!r} is not supported; choose one of: {', '.join(CACHE_TYPES)}"
    )

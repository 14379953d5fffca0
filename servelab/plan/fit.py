"""What an engine's planner adapter returns, and the settings it is asked with (pure values).

Each engine's ``planner.py`` (reached through the registry's ``Planner``) runs its own memory rules for a
request and expresses the result as an ``EngineFit``; ``plan.make`` turns that into a ``Plan``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from servelab.errors import ConfigError
from servelab.hardware.gpus import GPU
from servelab.model.spec import LayerKind, ModelSpec
from servelab.plan.types import MemoryBytes
from servelab.plan.weights import weight_bytes

SPECULATIVE_METHODS = ("mtp", "eagle", "ngram", "draft")
MAX_SPECULATIVE_TOKENS = 16  # servelab.speculative.theory.MAX_GAMMA


@dataclass(frozen=True)
class Speculative:
    """Speculative decoding as asked: `method` mtp (the model's own MTP layers: vLLM method mtp, sglang NEXTN),
    eagle (an EAGLE draft head, `draft`), ngram (prompt lookup, no weights), draft (a separate draft model:
    llama.cpp -md, vLLM/sglang a draft model path); `num_tokens` drafted per step (vLLM
    num_speculative_tokens, sglang --speculative-num-steps, llama.cpp --spec-draft-n-max)."""

    method: str
    num_tokens: int
    draft: ModelSpec | None = None  # eagle / draft: the draft's weights and KV
    draft_path: str = ""  # as the command names it

    def __post_init__(self) -> None:
        if self.method not in SPECULATIVE_METHODS:
            raise ConfigError(
                f"speculative method {self.method!r} is not known; choose one of: {', '.join(SPECULATIVE_METHODS)}"
            )
        if not 1 <= self.num_tokens <= MAX_SPECULATIVE_TOKENS:
            raise ConfigError(
                f"speculative tokens must be 1 to {MAX_SPECULATIVE_TOKENS}, got {self.num_tokens}"
            )
        if self.method in ("eagle", "draft") and self.draft is None:
            raise ConfigError(
                f"speculative method {self.method} needs a draft model (--draft-model FILE or id)"
            )

    def draft_weights(self, model: ModelSpec) -> int:
        """Bytes of the draft the engine loads: the model's MTP layers for mtp, the draft model's weights."""
        if self.method == "mtp":
            return weight_bytes(model).mtp
        return self.draft.weight_bytes if self.draft is not None else 0

    def draft_attention_layers(self, model: ModelSpec) -> int:
        """Attention layers the draft adds to the KV cache (the MTP layers, or the draft head's full layers)."""
        if self.method == "mtp":
            return model.mtp_layers
        if (
            self.draft is not None
        ):  # counted in the target's shape: EAGLE heads share it, a draft model may not
            return self.draft.count(LayerKind.FULL_ATTENTION)
        return 0


@dataclass(frozen=True)
class PlanSettings:
    context: int
    kv_dtype: str | None = None
    tp: int = 1
    parallel: int = 1  # concurrent sequences to plan for
    mem_fraction_static: float | None = None
    gpu_memory_utilization: float | None = None
    max_total_tokens: int | None = None
    n_gpu_layers: int | None = None
    kv_unified: bool = (
        False  # llama.cpp: one pool all slots share (-c = context) instead of -c = context x slots
    )
    max_mamba_cache_size: int | None = None
    kv_cache_space_gib: int | None = None  # vLLM on CPU: VLLM_CPU_KVCACHE_SPACE
    max_num_seqs: int | None = None  # vLLM --max-num-seqs (default: --parallel when > 1, else vLLM's)
    max_num_batched_tokens: int | None = None  # vLLM --max-num-batched-tokens
    kv_cache_memory_bytes: int | None = None  # vLLM --kv-cache-memory-bytes: the KV pool, no profiling
    # the engine's release whose rules to model, in its own spelling (vLLM 0.10.1, sglang 0.4.4.post1, llama.cpp
    # b8354); None: the current one
    engine_version: str | None = None
    enable_prefix_caching: bool | None = (
        None  # vLLM --[no-]enable-prefix-caching (None: its default, off for hybrids)
    )
    # vLLM --language-model-only (or --limit-mm-per-prompt with every modality 0): a multimodal checkpoint served
    # as text only, so no vision-encoder profile at start-up
    language_model_only: bool = False
    n_batch: int | None = None  # llama.cpp -b (logical batch; default 2048)
    n_ubatch: int | None = None  # llama.cpp -ub (physical batch that sizes the compute buffer; default 512)
    n_cpu_moe: int | None = None  # llama.cpp --n-cpu-moe N: the experts of the first N layers in host RAM
    cpu_moe: bool = False  # llama.cpp -ot exps=CPU (--cpu-moe): every layer's experts in host RAM
    speculative: Speculative | None = (
        None  # speculative decoding / MTP (draft weights, their KV, the lookahead)
    )
    flash_attn: str | None = None  # llama.cpp -fa on/off/auto (None: on, as the plan emits it)
    kv_dtype_v: str | None = None  # llama.cpp -ctv when the V cache type differs from -ctk (kv_dtype)
    host: str = "127.0.0.1"
    port: int | None = None
    model_path: str = ""


@dataclass(frozen=True)
class Refusal:
    """Why the engine would refuse these settings: not start at all, or not serve the asked context. `message`
    names the engine's own complaint and the flag that fixes it; `fix` holds the PlanSettings values that remedy
    it without shrinking the request (the search applies them), empty when only a shorter context, a smaller
    quant or more memory helps."""

    message: str
    fix: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class EngineFit:
    memory: MemoryBytes
    fits: bool
    context_served: int
    slots: int
    kv_dtype: str
    details: Mapping[str, object]
    argv: list[str]
    warnings: list[str]
    max_batch: int
    refusals: tuple[Refusal, ...] = ()  # any refusal makes the plan `fits: false`


def weight_split(
    model: ModelSpec, tp: int, *, vision: bool, mtp: bool, speculative: Speculative | None = None
) -> tuple[int, int, int]:
    """Text, vision and MTP (or draft) weight bytes per GPU when ``tp`` GPUs share them: the MTP head only when
    speculative decoding uses it (or `mtp`), a draft model's weights in its place."""
    w = weight_bytes(model, vision=vision, mtp=mtp)
    draft = speculative.draft_weights(model) if speculative is not None else w.mtp
    return w.language // tp, w.vision // tp, draft // tp


def memory_bytes(
    gpu: GPU, text: int, vision: int, mtp: int, kv: int, state: int, act: int, runtime: int, host: int = 0
) -> MemoryBytes:
    weights = text + vision + mtp
    return MemoryBytes(
        weights,
        kv,
        state,
        act,
        runtime,
        weights + kv + state + act + runtime,
        gpu.memory_bytes,
        text,
        vision,
        mtp,
        host,
    )

"""llama.cpp's own knobs as `plan`/`predict` take them (`servelab plan MODEL --engine llamacpp -- -ub 256`), and the
figures its planner hands its scheduler and saves (the contract: servelab/sizing/typed.py)."""

from __future__ import annotations

from dataclasses import dataclass

from servelab.engines.llamacpp.memory import FLASH_ATTN_MODES
from servelab.errors import ConfigError
from servelab.sizing.typed import MAX_CONTEXT, Figures, SpeculativeWords, check_whole, setting

MAX_CPU_MOE_LAYERS = 10_000
MAX_SPECULATIVE_TOKENS = 16  # servelab.sizing.fit.MAX_SPECULATIVE_TOKENS
DRAFT_MAX = 16  # --spec-draft-n-max's default (common/common.h: n_max)


@dataclass(frozen=True, kw_only=True)
class LlamaCppSettings:
    """llama-server's flags the planner prices; None/False: not given (llama-server's default, or the plan's)."""

    n_gpu_layers: int | None = setting("-ngl", "layers on the GPU (-1: all; default all)")
    n_batch: int | None = setting("-b", "logical batch in tokens (default 2048)")
    n_ubatch: int | None = setting("-ub", "physical batch that sizes the compute buffer (default 512)")
    kv_unified: bool = setting(
        "--kv-unified", "one KV pool all slots share (-c = the context, not x slots)", False
    )
    n_cpu_moe: int | None = setting("--n-cpu-moe", "the experts of the first N layers in host RAM")
    cpu_moe: bool = setting("--cpu-moe", "every layer's experts in host RAM (-ot exps=CPU)", False)
    flash_attn: str | None = setting("-fa", "flash attention on/off/auto (default on, as the plan emits it)")
    kv_dtype_v: str | None = setting("-ctv", "V cache type when it differs from -ctk (--kv-dtype)")
    model_draft: str | None = setting("-md", "the draft model (a .gguf) for speculative decoding")
    draft_max: int | None = setting(
        "--spec-draft-n-max", f"tokens drafted per step with -md (default {DRAFT_MAX})"
    )

    def __post_init__(self) -> None:
        if self.n_gpu_layers is not None and (
            isinstance(self.n_gpu_layers, bool)
            or not isinstance(self.n_gpu_layers, int)
            or self.n_gpu_layers < -1
        ):
            raise ConfigError(
                f"-ngl must be -1 (all layers), 0 or a positive layer count, got {self.n_gpu_layers}"
            )
        check_whole(self.n_batch, "-b", 1, MAX_CONTEXT, "tokens")
        check_whole(self.n_ubatch, "-ub", 1, MAX_CONTEXT, "tokens")
        check_whole(self.n_cpu_moe, "--n-cpu-moe", 0, MAX_CPU_MOE_LAYERS, "layers")
        if self.flash_attn is not None and self.flash_attn.lower() not in FLASH_ATTN_MODES:
            raise ConfigError(
                f"llama.cpp -fa {self.flash_attn!r} is not a mode; choose one of: {', '.join(FLASH_ATTN_MODES)}"
            )
        check_whole(self.draft_max, "--spec-draft-n-max", 1, MAX_SPECULATIVE_TOKENS, "tokens")
        if self.draft_max is not None and self.model_draft is None:
            raise ConfigError(
                "llama.cpp --spec-draft-n-max drafts with a draft model: give -md DRAFT.gguf too"
            )


def speculative_words(settings: LlamaCppSettings) -> SpeculativeWords | None:
    """-md DRAFT [--spec-draft-n-max N] in servelab's terms (None: no draft)."""
    if settings.model_draft is None:
        return None
    return SpeculativeWords("draft", settings.draft_max or DRAFT_MAX, settings.model_draft)


@dataclass(frozen=True, kw_only=True)
class LlamaCppFigures(Figures):
    """What the plan found (the names llama-server logs them by); the scheduler reads the slots and batches. None:
    not a figure of the CPU device's plan."""

    n_ctx: int
    n_ctx_per_slot: int
    n_parallel: int
    kv_unified: bool
    n_gpu_layers: int
    compute_buffer_bytes: int
    output_buffer_bytes: int
    kv_cells: int
    flash_attn: bool | None = None
    cache_type_v: str | None = None
    n_batch: int | None = None  # the CPU plan: llama-server's default
    n_ubatch: int | None = None
    experts_host_bytes: int | None = None
    model_bytes: int | None = None  # every device's `model buffer size`, host included
    kv_bytes: int | None = None  # `KV self size` / `llama_kv_cache: size`, host layers included
    recurrent_bytes: int | None = None  # `llama_memory_recurrent: size`

"""What an engine's planner adapter returns, and the settings it is asked with (pure values).

Each engine's ``planner.py`` (reached through the registry's ``Planner``) runs its own memory rules for a
request and expresses the result as an ``EngineFit``; ``plan.make`` turns that into a ``Plan``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from servelab.errors import ConfigError
from servelab.hardware.gpus import GPU
from servelab.model.spec import LayerKind, ModelSpec
from servelab.sizing.typed import Figures
from servelab.sizing.types import MemoryBytes
from servelab.sizing.weights import weight_bytes

SPECULATIVE_METHODS = ("mtp", "eagle", "ngram", "draft")
MAX_SPECULATIVE_TOKENS = 16  # servelab.speculative.theory.MAX_GAMMA
S = TypeVar("S")


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


@dataclass(frozen=True, kw_only=True)
class PlanSettings(Generic[S]):
    """What one plan asks of an engine: what every engine shares, and `engine`, that engine's own Settings (its
    knobs, validated where they are made: servelab/engines/<e>/settings.py)."""

    context: int
    engine: S
    kv_dtype: str | None = None
    tp: int = 1
    parallel: int = 1  # concurrent sequences to plan for
    # the engine's release whose rules to model, in its own spelling (vLLM 0.10.1, sglang 0.4.4.post1, llama.cpp
    # b8354); None: the current one
    engine_version: str | None = None
    speculative: Speculative | None = (
        None  # speculative decoding / MTP (draft weights, their KV, the lookahead)
    )
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


@dataclass(frozen=True, kw_only=True)
class EngineFit:
    memory: MemoryBytes
    fits: bool
    context_served: int
    slots: int
    kv_dtype: str
    figures: (
        Figures  # the engine's own (servelab/sizing/typed.py): its scheduler's input, the plan's `details`
    )
    argv: list[str]
    warnings: list[str]
    max_batch: int
    refusals: tuple[Refusal, ...] = ()  # any refusal makes the plan `fits: false`
    full_context_batch: int | None = None  # sequences at the served context held at once, where the engine
    # fixes it (llama.cpp: its slots, each a window of its own); None: as many as the KV pool holds


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
        weights=weights,
        kv_cache=kv,
        recurrent_state=state,
        activations=act,
        runtime=runtime,
        total=weights + kv + state + act + runtime,
        capacity=gpu.memory_bytes,
        weights_text=text,
        weights_vision=vision,
        weights_mtp=mtp,
        host_bytes=host,
    )

"""Weight bytes by component, and the bytes one decode step must read.

Decode reads every active weight once, except the input embedding (one row is gathered per token); the lm_head is
read in full (a tied matrix once, as the lm_head). MoE layers read only the routed and shared experts: a group's
read bytes scale by active_params / params. Source: docs/reference/memory.md §7.
"""

from __future__ import annotations

from dataclasses import dataclass

from servelab.model.spec import ModelSpec, WeightGroup

COMPONENTS = ("text", "embedding", "lm_head", "vision", "mtp")


@dataclass(frozen=True)
class WeightBytes:
    text: int  # decoder body (attention, MLP / experts, norms, linear-attention)
    embedding: int
    lm_head: int
    vision: int
    mtp: int

    @property
    def language(self) -> int:
        """What a text-only server must hold: body + embedding + lm_head."""
        return self.text + self.embedding + self.lm_head

    @property
    def total(self) -> int:
        return self.language + self.vision + self.mtp


def weight_bytes(model: ModelSpec, *, vision: bool = True, mtp: bool = True) -> WeightBytes:
    """The model's weights by component; `vision`/`mtp` False leaves those components out (not loaded)."""
    by_name = {name: 0 for name in COMPONENTS}
    for group in model.weights:
        key = group.name if group.name in by_name else "text"
        by_name[key] += group.bytes
    return WeightBytes(
        text=by_name["text"],
        embedding=by_name["embedding"],
        lm_head=by_name["lm_head"],
        vision=by_name["vision"] if vision else 0,
        mtp=by_name["mtp"] if mtp else 0,
    )


def _active_bytes(group: WeightGroup) -> float:
    if group.active_bytes is not None:
        return float(group.active_bytes)
    if group.active_params is None or group.params == 0:
        return float(group.bytes)
    return group.bytes * group.active_params / group.params


def decode_read_bytes(model: ModelSpec) -> float:
    """Weight bytes read to decode one token of one sequence."""
    total = 0.0
    for group in model.weights:
        if group.name in ("vision", "mtp"):
            continue
        if group.name == "embedding":
            has_head = model.weight_group("lm_head") is not None
            row = group.bytes / max(1, model.vocab_size)
            total += row if (has_head or not model.tie_word_embeddings) else group.bytes
            continue
        total += _active_bytes(group)
    return total


def output_head_params(model: ModelSpec) -> float:
    """Parameters of the output projection (the lm_head, or the tied embedding it reuses): the multiply-adds only
    the positions whose logits are wanted pay (a prompt's last token, each decoded token)."""
    head = model.weight_group("lm_head")
    if head is not None:
        return float(head.params)
    embedding = model.weight_group("embedding")
    return float(embedding.params) if embedding is not None and model.tie_word_embeddings else 0.0


def active_params(model: ModelSpec) -> float:
    """Parameters that do a multiply-add per token (embedding lookup excluded; tied lm_head counted once)."""
    total = 0.0
    for group in model.weights:
        if group.name in ("vision", "mtp"):
            continue
        if group.name == "embedding":
            if model.tie_word_embeddings and model.weight_group("lm_head") is None:
                total += group.params
            continue
        total += group.active_params if group.active_params is not None else group.params
    return total

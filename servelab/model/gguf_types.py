"""GGUF tensor types (block size, bytes per block) and the llama-quantize mixes built from them.

Types: every ggml type the installed `gguf` package knows (gguf.GGML_QUANT_SIZES), plus two fork-only
types from PrismML's llama.cpp fork: PQ2_0 (type 142, 34 B per 128 weights = 2.125 bpw) and PTQ1_0
(type 143, 28 B per 128 = 1.75 bpw); docs/reference/memory.md §6.

Mixes follow llama.cpp src/llama-quant.cpp `llama_tensor_get_type`: a base type for most matrices, a
higher-precision `output.weight` (Q6_K), and some `attn_v` / `ffn_down` / `attn_output` tensors in more
bits — on the `use_more_bits` layers (first and last eighth, every third in between) for *_M mixes.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GGUFType:
    name: str
    type_id: int
    block_weights: int
    block_bytes: int

    @property
    def bits_per_weight(self) -> float:
        return self.block_bytes * 8 / self.block_weights


FORK_TYPES = (GGUFType("PQ2_0", 142, 128, 34), GGUFType("PTQ1_0", 143, 128, 28))


def gguf_types() -> dict[str, GGUFType]:
    """Every known GGUF type by upper-case name."""
    import gguf  # late: gguf pulls in numpy, which `import servelab.model` should not pay for

    types = {
        qtype.name: GGUFType(qtype.name, int(qtype.value), block, size)
        for qtype, (block, size) in gguf.GGML_QUANT_SIZES.items()
    }
    types.update({t.name: t for t in FORK_TYPES})
    return types


@dataclass(frozen=True)
class LayerRule:
    """`role` tensors get `type_name` on the layers `which` selects: all, more_bits, first_eighth, first_n:K."""

    role: str
    type_name: str
    which: str = "all"

    def applies(self, layer: int, n_layers: int) -> bool:
        if self.which == "all":
            return True
        if self.which == "more_bits":
            return use_more_bits(layer, n_layers)
        if self.which == "first_eighth":
            return layer < n_layers // 8
        if self.which == "first_sixteenth":
            return layer < n_layers // 16
        return layer < int(self.which.removeprefix("first_"))


def use_more_bits(layer: int, n_layers: int) -> bool:
    """llama-quant.cpp: `i < n/8 || i >= 7*n/8 || (i - n/8) % 3 == 2`."""
    return layer < n_layers // 8 or layer >= 7 * n_layers // 8 or (layer - n_layers // 8) % 3 == 2


@dataclass(frozen=True)
class GGUFMix:
    """A llama-quantize file type: base type, output/token_embd types and per-layer upgrades (first rule wins, GQA rules first)."""

    name: str
    base: str
    output: str = "Q6_K"
    token_embd: str | None = None  # None: the base type
    rules: tuple[LayerRule, ...] = ()
    gqa_rules: tuple[LayerRule, ...] = ()  # only when n_head / n_head_kv >= 4

    def role_type(self, role: str, layer: int, n_layers: int, gqa: int) -> str:
        rules = (self.gqa_rules if gqa >= 4 else ()) + self.rules
        for rule in rules:
            if rule.role == role and rule.applies(layer, n_layers):
                return rule.type_name
        return self.base


def _more(role: str, type_name: str) -> LayerRule:
    return LayerRule(role, type_name, "more_bits")


GGUF_MIXES = (
    GGUFMix(
        "Q2_K",
        "Q2_K",
        rules=(LayerRule("ffn_down", "Q3_K"), LayerRule("attn_output", "Q3_K"), LayerRule("attn_v", "Q3_K")),
        gqa_rules=(LayerRule("attn_v", "Q4_K"),),
    ),
    GGUFMix("Q3_K_S", "Q3_K"),
    GGUFMix(
        "Q3_K_M",
        "Q3_K",
        rules=(
            LayerRule("attn_v", "Q5_K", "first_2"),
            LayerRule("attn_v", "Q4_K"),
            LayerRule("ffn_down", "Q5_K", "first_sixteenth"),
            LayerRule("ffn_down", "Q4_K"),
            LayerRule("attn_output", "Q4_K"),
        ),
    ),
    GGUFMix(
        "Q3_K_L",
        "Q3_K",
        rules=(LayerRule("attn_v", "Q5_K"), LayerRule("ffn_down", "Q5_K"), LayerRule("attn_output", "Q5_K")),
    ),
    GGUFMix("Q4_0", "Q4_0"),
    GGUFMix("Q4_1", "Q4_1"),
    GGUFMix(
        "Q4_K_S",
        "Q4_K",
        rules=(LayerRule("attn_v", "Q5_K", "first_4"), LayerRule("ffn_down", "Q5_K", "first_eighth")),
    ),
    GGUFMix("Q4_K_M", "Q4_K", rules=(_more("attn_v", "Q6_K"), _more("ffn_down", "Q6_K"))),
    GGUFMix("Q5_0", "Q5_0"),
    GGUFMix("Q5_1", "Q5_1"),
    GGUFMix("Q5_K_S", "Q5_K"),
    GGUFMix("Q5_K_M", "Q5_K", rules=(_more("attn_v", "Q6_K"), _more("ffn_down", "Q6_K"))),
    GGUFMix("Q6_K", "Q6_K"),
    GGUFMix("Q8_0", "Q8_0", output="Q8_0"),
    GGUFMix(
        "IQ4_NL",
        "IQ4_NL",
        rules=(LayerRule("ffn_down", "Q5_K", "first_eighth"),),
        gqa_rules=(LayerRule("attn_v", "Q5_K"),),
    ),
    GGUFMix(
        "IQ4_XS",
        "IQ4_XS",
        rules=(LayerRule("ffn_down", "Q5_K", "first_eighth"),),
        gqa_rules=(LayerRule("attn_v", "Q5_K"),),
    ),
    GGUFMix("MXFP4_MOE", "Q8_0", output="Q8_0", rules=(LayerRule("experts", "MXFP4"),)),
    GGUFMix("TQ1_0", "TQ1_0", token_embd="Q4_K"),
    GGUFMix("TQ2_0", "TQ2_0", token_embd="Q4_K"),
    GGUFMix("PTQ1_0", "PTQ1_0", output="PTQ1_0"),
    GGUFMix("PQ2_0", "PQ2_0", output="PQ2_0"),
    GGUFMix("F16", "F16", output="F16"),
)


def gguf_mixes() -> dict[str, GGUFMix]:
    return {mix.name: mix for mix in GGUF_MIXES}

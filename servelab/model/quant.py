"""Quantization formats: effective bits per weight (scales and zero points included) and what they leave alone.

Figures (docs/reference/memory.md §6): AWQ/GPTQ store `bits` per weight plus one fp16 scale and one
`bits`-wide zero point per group (GPTQ checkpoints keep qzeros even when symmetric): 4 + 20/128 = 4.15625 for
w4g128. Symmetric compressed-tensors int drops the zero point. FP8 per-tensor/per-channel: 8 bits plus one fp32
scale per tensor/row (counted as 8); block 128×128: 8 + 32/16384. NVFP4: 4 + 8/16 (fp8 scale per 16) = 4.5;
MXFP4: 4 + 8/32 (e8m0 scale per 32) = 4.25. bitsandbytes NF4: 4 + 32/64 (fp32 absmax per 64), with double
quantization 4 + 8/64 + 32/16384. GPTQ g_idx (int32 per input channel) is not counted.
Embeddings, lm_head, norms, routers, convolutions and SSM parameters stay 16-bit for the HF formats; the
vision tower and MTP head too. GGUF types and mixes: servelab.model.gguf_types.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from typing import Any

from servelab.errors import ConfigError, ModelFormatError
from servelab.model.dtypes import find_dtype
from servelab.model.gguf_types import GGUFMix, gguf_mixes, gguf_types
from servelab.model.spec import ATTENTION_KINDS, ModelSpec, WeightGroup, whole

LINEAR_ROLES = frozenset({"linear", "attn_v", "attn_output", "ffn_down", "experts"})
_GROUP_SIZES = (32, 64, 128, -1)
_BITS = {"awq": (4, 8), "gptq": (2, 3, 4, 8)}
_FLOAT_BITS = {"bf16": 16.0, "fp16": 16.0, "fp32": 32.0}
_ALIASES = {  # dtype spellings (bfloat16, float16, half …) resolve through servelab.model.dtypes instead
    "f32": "fp32",
    "fp8-tensor": "fp8",
    "fp8_e4m3": "fp8",
    "int4": "gptq",
    "w4a16": "gptq",
}


@dataclass(frozen=True, kw_only=True)
class QuantFormat:
    """How weights are stored: bits for the quantized matrices and for everything the format leaves alone."""

    name: str
    family: str  # float, fp8, awq, gptq, int, bnb, nvfp4, mxfp4, gguf
    bits_per_weight: float  # the quantized matrices, scales and zero points included
    quantized_roles: frozenset[str] = LINEAR_ROLES
    embedding_bits: float = 16.0
    lm_head_bits: float = 16.0
    small_bits: float = 16.0  # norms, biases, routers, conv1d, SSM A/dt
    vision_bits: float = 16.0
    mtp_bits: float = 16.0
    mix: GGUFMix | None = None
    unquantized_modules: tuple[str, ...] = ()  # from the config's modules_to_not_convert / ignore


def float_format(name: str) -> QuantFormat:
    bits = _FLOAT_BITS[name]
    return QuantFormat(
        name=name,
        family="float",
        bits_per_weight=bits,
        quantized_roles=LINEAR_ROLES,
        embedding_bits=bits,
        lm_head_bits=bits,
        small_bits=bits,
        vision_bits=bits,
        mtp_bits=bits,
    )


def int_group_format(family: str, bits: int, group: int, *, zero_point: bool = True) -> QuantFormat:
    """AWQ / GPTQ / compressed-tensors int: `bits` + (fp16 scale [+ zero point]) per group."""
    if bits not in _BITS.get(family, (2, 3, 4, 8)):
        raise ConfigError(
            f"{family} cannot store {bits}-bit weights; valid: {', '.join(map(str, _BITS.get(family, (2, 3, 4, 8))))}"
        )
    if group not in _GROUP_SIZES:
        raise ConfigError(
            f"{family} group size {group} is not supported; valid: {', '.join(map(str, _GROUP_SIZES))}"
        )
    zero_point = zero_point or family == "gptq"  # GPTQ checkpoints store qzeros even when symmetric
    overhead = 0.0 if group == -1 else (16 + (bits if zero_point else 0)) / group
    suffix = "" if zero_point else "-sym"
    return QuantFormat(
        name=f"{family}-w{bits}g{group}{suffix}", family=family, bits_per_weight=bits + overhead
    )


def fp8_format(scaling: str = "tensor") -> QuantFormat:
    bits = (
        8 + 32 / (128 * 128) if scaling == "block" else 8.0
    )  # fp8 checkpoints ship the MTP layer in fp8 too
    return QuantFormat(
        name="fp8" if scaling == "tensor" else f"fp8-{scaling}",
        family="fp8",
        bits_per_weight=bits,
        mtp_bits=bits,
    )


def gguf_format(mix: GGUFMix) -> QuantFormat:
    """A llama-quantize mix: matrices by rule, norms/routers F32, token_embd / output by the mix."""
    types = gguf_types()
    embd = types[mix.token_embd or mix.base].bits_per_weight
    return QuantFormat(
        name=mix.name,
        family="gguf",
        bits_per_weight=types[mix.base].bits_per_weight,
        quantized_roles=LINEAR_ROLES,
        embedding_bits=embd,
        lm_head_bits=types[mix.output].bits_per_weight,
        small_bits=32.0,
        vision_bits=16.0,
        mtp_bits=types[mix.base].bits_per_weight,
        mix=mix,
    )


def _named_formats() -> dict[str, QuantFormat]:
    formats = {name: float_format(name) for name in _FLOAT_BITS}
    formats.update(
        {"fp8": fp8_format(), "fp8-channel": fp8_format("channel"), "fp8-block": fp8_format("block")}
    )
    formats["awq"] = int_group_format("awq", 4, 128)
    formats["gptq"] = int_group_format("gptq", 4, 128)
    formats["bnb-nf4"] = QuantFormat(
        name="bnb-nf4", family="bnb", bits_per_weight=4 + 32 / 64
    )  # fp32 absmax per 64
    formats["bnb-nf4-dq"] = QuantFormat(
        name="bnb-nf4-dq", family="bnb", bits_per_weight=4 + 8 / 64 + 32 / (64 * 256)
    )  # 8-bit absmax, fp32 per 256
    formats["bnb-int8"] = QuantFormat(
        name="bnb-int8", family="bnb", bits_per_weight=8.0
    )  # + one fp32 scale per row
    formats["nvfp4"] = QuantFormat(name="nvfp4", family="nvfp4", bits_per_weight=4.5)
    formats["mxfp4"] = QuantFormat(name="mxfp4", family="mxfp4", bits_per_weight=4.25)
    return formats


def quant_names() -> list[str]:
    """Every name `get_quant` accepts (besides the awq-w{b}g{g} / gptq-w{b}g{g} patterns)."""
    skip = {*gguf_mixes(), "I8", "I16", "I32", "I64", "F64"}  # integer / f64 tensors are not weight formats
    extra_types = [
        n
        for n in gguf_types()
        if n not in skip and _ALIASES.get(n.lower(), n.lower()) not in _named_formats()
    ]
    return [*_named_formats(), *gguf_mixes(), *extra_types]


USUAL_SAFETENSORS_QUANTS = (
    "bf16",
    "fp8",
    "awq",
)  # what `plan` compares for engines loading safetensors weights


# One format, two spellings: the safetensors name and the llama-quantize mix that stores it in a GGUF file
# (llama.cpp's MXFP4_MOE puts the MoE experts in MXFP4, llama-quant.cpp; users write MXFP4). Keys lower-case.
_GGUF_SPELLINGS = {"mxfp4": "MXFP4_MOE"}


def quant_name_for(name: str, weight_formats: str) -> str:
    """`name` as an engine loading `weight_formats` weights ("gguf" or "hf") spells the format: MXFP4 is the
    MXFP4_MOE mix for llama.cpp and the safetensors mxfp4 for sglang / vLLM; any other name is unchanged."""
    key = name.strip().lower()
    if weight_formats == "gguf":
        return _GGUF_SPELLINGS.get(key, name)
    back = {gguf.lower(): hf for hf, gguf in _GGUF_SPELLINGS.items()}
    return back.get(key, name)


def get_quant(name: str) -> QuantFormat:
    """Look a format up by name (case-insensitive); ConfigError naming the valid choices."""
    key = _ALIASES.get(name.strip().lower(), name.strip().lower())
    formats = _named_formats()
    if key in formats:
        return formats[key]
    pattern = re.fullmatch(r"(awq|gptq|int)-w(\d+)g(-?\d+)(-sym)?", key)
    if pattern:
        family, bits, group, sym = pattern.groups()
        return int_group_format(family, int(bits), int(group), zero_point=not sym)
    upper = key.upper()
    if upper in gguf_mixes():
        return gguf_format(gguf_mixes()[upper])
    if upper in gguf_types():
        return gguf_format(GGUFMix(upper, upper, output=upper))
    dtype = find_dtype(key)  # after the GGUF names, so that f16 stays GGUF's F16
    if dtype in _FLOAT_BITS:
        return formats[dtype]
    choices = ", ".join(quant_names()[:12])
    raise ConfigError(
        f"unknown quant {name!r}; valid: {choices}, awq-w{{4,8}}g{{32,64,128,-1}}, "
        f"gptq-w{{2,3,4,8}}g{{…}}, any GGUF mix or type (Q4_K_M, IQ4_XS, TQ1_0, PTQ1_0, …)"
    )


def quant_from_config(qc: dict[str, Any]) -> QuantFormat:
    """A HF `quantization_config` → QuantFormat (awq, gptq, fp8, mxfp4, modelopt, compressed-tensors)."""
    method = str(qc.get("quant_method", "")).lower()
    ignore = tuple(str(m) for m in (qc.get("modules_to_not_convert") or qc.get("ignore") or ()))
    if method in ("awq", "gptq"):
        bits = int(qc.get("bits") or qc.get("w_bit") or 4)
        group = int(qc.get("group_size") or qc.get("q_group_size") or 128)
        zero = bool(qc.get("zero_point", True)) if method == "awq" else True
        return replace(int_group_format(method, bits, group, zero_point=zero), unquantized_modules=ignore)
    if method == "fp8":
        scaling = "block" if qc.get("weight_block_size") else "tensor"
        return replace(fp8_format(scaling), unquantized_modules=ignore)
    if method == "mxfp4":  # transformers' Mxfp4HfQuantizer converts the MoE experts only
        return QuantFormat(
            name="mxfp4",
            family="mxfp4",
            bits_per_weight=4.25,
            quantized_roles=frozenset({"experts"}),
            unquantized_modules=ignore,
        )
    if method == "modelopt":
        algo = str(qc.get("quant_algo") or qc.get("quantization", {}).get("quant_algo", "")).upper()
        return replace(get_quant("nvfp4" if "FP4" in algo else "fp8"), unquantized_modules=ignore)
    if method == "bitsandbytes":
        if qc.get("load_in_8bit"):
            return get_quant("bnb-int8")
        return get_quant("bnb-nf4-dq" if qc.get("bnb_4bit_use_double_quant") else "bnb-nf4")
    if method == "compressed-tensors":
        return replace(_compressed_tensors(qc), unquantized_modules=ignore)
    raise ConfigError(
        f"unsupported quant_method {method!r}; supported: awq, gptq, fp8, mxfp4, modelopt, "
        "compressed-tensors, bitsandbytes"
    )


def _compressed_tensors(qc: dict[str, Any]) -> QuantFormat:
    if "nvfp4" in str(qc.get("format", "")).lower():
        return get_quant("nvfp4")
    config_groups = qc.get("config_groups") or {}
    if not isinstance(config_groups, dict):
        raise ModelFormatError(
            "compressed-tensors quantization_config: config_groups must be an object of named groups, "
            f"not {type(config_groups).__name__}"
        )
    groups = [
        g["weights"]
        for g in config_groups.values()
        if isinstance(g, dict) and isinstance(g.get("weights"), dict)
    ]
    if not groups:
        raise ConfigError("compressed-tensors quantization_config has no config_groups with weights")
    weights = groups[0]
    bits, strategy = whole(weights.get("num_bits", 8)), str(weights.get("strategy", "tensor"))
    if weights.get("type") == "float":
        return fp8_format(strategy if strategy in ("channel", "block") else "tensor")
    group = whole(weights.get("group_size") or -1) if strategy == "group" else -1
    return int_group_format("int", bits, group, zero_point=not weights.get("symmetric", True))


def synthesise_weights(spec: ModelSpec, quant: QuantFormat | str) -> ModelSpec:
    """Weights priced from the architecture's parameter counts in `quant` (catalog and config.json models)."""
    fmt = get_quant(quant) if isinstance(quant, str) else quant
    groups, roles = spec.extra.get("param_groups"), spec.extra.get("param_roles")
    if not isinstance(groups, dict) or not groups or not isinstance(roles, dict):
        raise ConfigError(
            f"{spec.name}: weights were read from a file ({spec.quant}); --quant applies to "
            "catalog models and config.json files"
        )
    bits = role_bits(spec, fmt)
    weights = tuple(
        _group(spec, fmt, name, params, active, roles, bits) for name, (params, active) in groups.items()
    )
    return replace(spec, weights=weights, quant=fmt.name, weights_exact=False)


def _group(
    spec: ModelSpec,
    fmt: QuantFormat,
    name: str,
    params: int,
    active: int | None,
    roles: dict[str, int],
    bits: dict[str, float],
) -> WeightGroup:
    if name != "text":
        group_bits = {
            "embedding": fmt.embedding_bits,
            "lm_head": fmt.lm_head_bits,
            "vision": fmt.vision_bits,
            "mtp": fmt.mtp_bits,
        }[name]
        return WeightGroup(name, params, math.ceil(params * group_bits / 8), _label(fmt, name, group_bits))
    total_bits = sum(count * bits[role] for role, count in roles.items())
    active_bytes = None
    if active is not None and spec.moe is not None:
        idle = roles.get("experts", 0) * (1 - spec.moe.experts_per_token / spec.moe.num_experts)
        active_bytes = math.ceil((total_bits - idle * bits["experts"]) / 8)
    return WeightGroup("text", params, math.ceil(total_bits / 8), fmt.name, active, active_bytes)


def _label(fmt: QuantFormat, group: str, bits: float) -> str:
    if fmt.mix is not None:
        return {
            "embedding": fmt.mix.token_embd or fmt.mix.base,
            "lm_head": fmt.mix.output,
            "vision": "F16",
        }.get(group, fmt.mix.base)
    return {16.0: "bf16", 32.0: "fp32"}.get(bits, fmt.name)


def role_bits(spec: ModelSpec, fmt: QuantFormat) -> dict[str, float]:
    """Effective bits per decoder-body role; GGUF mixes average their per-layer choices."""
    bits = {
        role: (fmt.bits_per_weight if role in fmt.quantized_roles else fmt.small_bits)
        for role in ("linear", "attn_v", "attn_output", "ffn_down", "experts")
    }
    bits["small"] = fmt.small_bits
    if fmt.mix is not None:
        bits.update(_mix_role_bits(spec, fmt.mix))
    return bits


def _mix_role_bits(spec: ModelSpec, mix: GGUFMix) -> dict[str, float]:
    types = gguf_types()
    attn_layers = sum(1 for k in spec.layer_kinds if k in ATTENTION_KINDS)
    gqa = spec.attention.num_heads // max(1, spec.attention.num_kv_heads) if spec.attention else 1

    def mean_bits(role: str, n_layers: int) -> float:
        n = max(1, n_layers)
        return sum(types[mix.role_type(role, i, n, gqa)].bits_per_weight for i in range(n)) / n

    down = mean_bits("ffn_down", spec.num_layers)
    base = types[mix.base].bits_per_weight
    experts = types[mix.role_type("experts", 0, 1, gqa)].bits_per_weight
    experts = (
        experts if experts != base else (2 * base + down) / 3
    )  # gate/up at base, down by the ffn_down rule
    return {
        "attn_v": mean_bits("attn_v", attn_layers),
        "attn_output": mean_bits("attn_output", attn_layers),
        "ffn_down": down,
        "experts": experts,
    }


# The kernel family a decode step runs per weight format: the key of each engine's decode-efficiency table
# (servelab/engines/<e>/efficiency.py, docs/planning.md "Decode efficiency"). GGUF mixes go by their base type.
_GGUF_FAMILIES = {
    **dict.fromkeys(("F16", "BF16", "F32"), "16-bit"),
    "Q8_0": "q8_0",
    **dict.fromkeys(("Q4_0", "Q4_1", "Q5_0", "Q5_1"), "q4_0"),
    **dict.fromkeys(("Q2_K", "Q3_K"), "q2_k-q3_k"),
    "Q4_K": "q4_k",
    "Q5_K": "q5_k",
    "Q6_K": "q6_k",
    **dict.fromkeys(("TQ1_0", "TQ2_0"), "tq"),
    "PTQ1_0": "ptq1_0",
    "PQ2_0": "pq2_0",
}
_HF_FAMILIES = {"float": "16-bit", "fp8": "fp8", "nvfp4": "fp4", "mxfp4": "fp4", "bnb": "bnb"}
INT4_MAX_BITS = 4.75  # awq / gptq / compressed-tensors int: up to here the 4-bit (Marlin) kernels, above int8


def decode_family(quant: str) -> str:
    """The decode kernel family of weights stored as `quant`: 16-bit, fp8, int8, int4, fp4, bnb, or a GGUF
    family (q8_0, q4_0, q2_k-q3_k, q4_k, q5_k, q6_k, iq, tq, ptq1_0, pq2_0); "unknown" for a name no table has."""
    try:
        fmt = get_quant(quant)
    except ConfigError:
        return "unknown"
    if fmt.mix is not None:
        if fmt.mix.name == "MXFP4_MOE":
            return "fp4"
        base = fmt.mix.base
        return "iq" if base.startswith("IQ") else _GGUF_FAMILIES.get(base, "unknown")
    if fmt.family in ("awq", "gptq", "int"):
        return "int4" if fmt.bits_per_weight <= INT4_MAX_BITS else "int8"
    return _HF_FAMILIES.get(fmt.family, "unknown")

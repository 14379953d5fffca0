"""Quantization formats: exact effective bits per weight, GGUF types and mixes, config parsing, synthesis.

Sources: docs/reference/memory.md §6 (AWQ/GPTQ group overheads, NVFP4/MXFP4, GGUF block sizes, fork types
PQ2_0/PTQ1_0, whole-file bpw of llama.cpp mixes on Llama-3.1-8B from llama.cpp tools/quantize/README.md).
"""

from __future__ import annotations

import gguf
import pytest

from servelab.errors import ConfigError
from servelab.model import load_model
from servelab.model.gguf_types import gguf_types, use_more_bits
from servelab.model.quant import get_quant, quant_from_config, synthesise_weights


@pytest.mark.parametrize(
    ("name", "bits"),
    [
        ("bf16", 16),
        ("fp16", 16),
        ("fp32", 32),
        ("fp8", 8),
        ("fp8-block", 8 + 32 / 16_384),
        ("awq", 4 + 20 / 128),
        ("awq-w4g64", 4 + 20 / 64),
        ("awq-w4g32", 4.625),
        ("gptq-w8g128", 8 + 24 / 128),
        ("gptq-w4g-1", 4),
        ("nvfp4", 4.5),
        ("mxfp4", 4.25),
        ("int-w4g128-sym", 4 + 16 / 128),
        ("bnb-nf4", 4.5),
        ("bnb-nf4-dq", 4 + 8 / 64 + 32 / 16_384),
        ("awq-w4g128-sym", 4 + 16 / 128),
        ("gptq-w4g128-sym", 4 + 20 / 128),
    ],
)
def test_effective_bits(name: str, bits: float) -> None:
    assert get_quant(name).bits_per_weight == pytest.approx(bits, abs=1e-12)


def test_every_gguf_type_known_with_exact_bits() -> None:
    types = gguf_types()
    for qtype, (block, size) in gguf.GGML_QUANT_SIZES.items():
        assert types[qtype.name].bits_per_weight == size * 8 / block
    assert (types["Q4_K"].bits_per_weight, types["Q6_K"].bits_per_weight, types["TQ1_0"].bits_per_weight) == (
        4.5,
        6.5625,
        1.6875,
    )
    assert (types["PTQ1_0"].type_id, types["PTQ1_0"].bits_per_weight) == (143, 1.75)
    assert (types["PQ2_0"].type_id, types["PQ2_0"].bits_per_weight) == (142, 2.125)


def test_use_more_bits_matches_llama_quant() -> None:
    # n = 32: first 4, last 4, and every third from layer 6 → 16 of 32 layers
    assert [i for i in range(32) if use_more_bits(i, 32)] == [
        0,
        1,
        2,
        3,
        6,
        9,
        12,
        15,
        18,
        21,
        24,
        27,
        28,
        29,
        30,
        31,
    ]


@pytest.mark.parametrize(
    ("mix", "bpw"),
    [
        ("Q4_K_M", 4.8944),
        ("Q4_K_S", 4.6672),
        ("Q5_K_M", 5.7036),
        ("Q6_K", 6.5633),
        ("Q8_0", 8.5008),
        ("Q2_K", 3.1593),
        ("IQ4_XS", 4.4597),
    ],
)
def test_gguf_mixes_match_llama_quantize_readme(mix: str, bpw: float) -> None:
    spec = load_model("meta-llama/Llama-3.1-8B", quant=mix)
    assert spec.weight_bytes * 8 / spec.total_params == pytest.approx(bpw, abs=5e-5)
    assert spec.weight_group("lm_head").dtype == ("Q8_0" if mix == "Q8_0" else "Q6_K")


def test_lookup_errors_name_valid_choices() -> None:
    with pytest.raises(ConfigError, match=r"unknown quant 'q9_z'; valid: bf16, fp16"):
        get_quant("q9_z")
    with pytest.raises(ConfigError, match="awq cannot store 3-bit weights; valid: 4, 8"):
        get_quant("awq-w3g128")
    with pytest.raises(ConfigError, match="group size 100 is not supported; valid: 32, 64, 128, -1"):
        get_quant("gptq-w4g100")


def test_quant_from_config() -> None:
    awq = quant_from_config(
        {
            "quant_method": "awq",
            "bits": 4,
            "group_size": 64,
            "zero_point": True,
            "modules_to_not_convert": ["visual"],
        }
    )
    assert (awq.name, awq.unquantized_modules) == ("awq-w4g64", ("visual",))
    assert quant_from_config(
        {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": False}
    ).name == ("awq-w4g128-sym")
    assert (
        quant_from_config({"quant_method": "gptq", "bits": 8, "group_size": 32, "sym": True}).name
        == "gptq-w8g32"
    )
    assert quant_from_config({"quant_method": "fp8", "weight_block_size": [128, 128]}).name == "fp8-block"
    mxfp4 = quant_from_config({"quant_method": "mxfp4"})
    assert mxfp4.quantized_roles == frozenset({"experts"})
    ct = {
        "quant_method": "compressed-tensors",
        "format": "pack-quantized",
        "ignore": ["lm_head"],
        "config_groups": {
            "group_0": {
                "weights": {
                    "num_bits": 4,
                    "type": "int",
                    "symmetric": True,
                    "strategy": "group",
                    "group_size": 128,
                }
            }
        },
    }
    assert quant_from_config(ct).bits_per_weight == 4.125
    assert (
        quant_from_config({"quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized"}).name
        == "nvfp4"
    )
    assert quant_from_config({"quant_method": "modelopt", "quant_algo": "NVFP4"}).name == "nvfp4"
    bnb = {"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_use_double_quant": True}
    assert quant_from_config(bnb).name == "bnb-nf4-dq"
    with pytest.raises(ConfigError, match="unsupported quant_method 'hqq'; supported: awq, gptq"):
        quant_from_config({"quant_method": "hqq"})


def test_awq_leaves_embeddings_and_lm_head_in_16_bit() -> None:
    spec = load_model("Qwen/Qwen3.5-27B", quant="awq")
    embed = 248_320 * 5120 * 2  # docs/reference/memory.md §6: 2 × 1.27B params stay bf16 = 5.1 GB
    assert spec.weight_group("embedding").bytes == spec.weight_group("lm_head").bytes == embed
    assert spec.weight_group("embedding").dtype == "bf16" and spec.quant == "awq-w4g128"
    roles = spec.extra["param_roles"]
    linear = sum(n for role, n in roles.items() if role != "small")
    expected_bits = linear * (4 + 20 / 128) + roles["small"] * 16
    assert spec.weight_group("text").bytes == -(-expected_bits // 8)


def test_gpt_oss_native_mxfp4_experts_only_and_active_bytes() -> None:
    spec = load_model("openai/gpt-oss-120b")
    text, roles = spec.weight_group("text"), spec.extra["param_roles"]
    assert spec.quant == "mxfp4" and spec.weight_group("lm_head").dtype == "bf16"
    other = sum(n for role, n in roles.items() if role != "experts")
    assert text.bytes == -(-(roles["experts"] * 4.25 + other * 16) // 8)
    idle_bits = roles["experts"] * (1 - 4 / 128) * 4.25
    assert text.active_bytes == -(-(roles["experts"] * 4.25 + other * 16 - idle_bits) // 8)
    # OpenAI gpt-oss model card: 116.83B total, 5.13B active (active includes the unembedding)
    assert round(spec.total_params / 1e9, 2) == 116.83
    assert round((text.active_params + spec.weight_group("lm_head").params) / 1e9, 2) == 5.13


def test_requantising_a_catalog_model() -> None:
    native = load_model("deepseek-v3")
    assert native.quant == "fp8-block" and native.weight_group("mtp").dtype == "fp8-block"
    nvfp4 = synthesise_weights(native, "nvfp4")
    assert nvfp4.weight_group("text").bytes < native.weight_group("text").bytes * 0.6


def test_mxfp4_moe_mix_prices_experts_in_mxfp4_and_the_rest_in_q8_0() -> None:
    spec = load_model("openai/gpt-oss-20b", quant="MXFP4_MOE")
    roles = spec.extra["param_roles"]
    dense = sum(n for role, n in roles.items() if role not in ("experts", "small"))
    expected_bits = roles["experts"] * 4.25 + dense * 8.5 + roles["small"] * 32  # llama-quant.cpp MXFP4_MOE
    assert spec.weight_group("text").bytes == -(-expected_bits // 8)
    assert spec.weight_group("lm_head").dtype == spec.weight_group("embedding").dtype == "Q8_0"


def test_docs_list_every_quant_name() -> None:
    from pathlib import Path

    from servelab.model.quant import quant_names

    docs = (Path(__file__).resolve().parents[2] / "docs" / "models.md").read_text()
    missing = [name for name in quant_names() if f"| `{name}` |" not in docs]
    assert missing == []


def test_dtype_spellings_name_float_formats_but_f16_stays_ggufs_f16() -> None:
    assert [get_quant(n).name for n in ("bfloat16", "float16", "half", "float32", "f32", "fp8_e4m3")] == [
        "bf16",
        "fp16",
        "fp16",
        "fp32",
        "fp32",
        "fp8",
    ]
    assert get_quant("f16").name == get_quant("F16").name == "F16"


def test_mxfp4_has_one_spelling_per_weight_family() -> None:
    # llama.cpp stores MXFP4 as the MXFP4_MOE mix (llama-quant.cpp); safetensors engines call it mxfp4
    from servelab.model.quant import quant_name_for

    assert quant_name_for("MXFP4", "gguf") == "MXFP4_MOE"
    assert quant_name_for("mxfp4", "gguf") == "MXFP4_MOE"
    assert quant_name_for("MXFP4_MOE", "hf") == "mxfp4"
    assert quant_name_for("mxfp4", "hf") == "mxfp4"
    assert quant_name_for("Q4_K_M", "gguf") == "Q4_K_M" and quant_name_for("awq", "hf") == "awq"

"""What `compare_plans` puts first: the checkpoint's own quantization, and the best fitting variant per engine x
quant (KV dtypes and engine knobs tried when --kv-dtype is not given). Issue 16 items 3-4."""

from __future__ import annotations

from servelab.hardware.gpus import find_gpu
from servelab.model.load import load_model
from servelab.plan.make import compare_plans, make_plan


def test_llamacpp_accepts_mxfp4_as_its_mxfp4_moe_mix() -> None:
    # before: "llamacpp cannot load mxfp4 weights"
    plan = make_plan(load_model("openai/gpt-oss-20b"), find_gpu("rtx4090"), engine="llamacpp", quant="MXFP4")
    assert plan.quant == "MXFP4_MOE" and plan.native_quant
    assert plan == make_plan(
        load_model("openai/gpt-oss-20b"), find_gpu("rtx4090"), engine="llamacpp", quant="mxfp4_moe"
    )


def test_gpt_oss_native_mxfp4_ranks_first_on_every_engine() -> None:
    plans = compare_plans(load_model("openai/gpt-oss-20b"), find_gpu("rtx4090"), context=32768).plans
    natives = [p for p in plans if p.native_quant]
    assert {(p.engine, p.quant) for p in natives} == {
        ("sglang", "mxfp4"),
        ("vllm", "mxfp4"),
        ("llamacpp", "MXFP4_MOE"),
    }
    assert all(p.fits for p in natives)
    assert list(plans[: len(natives)]) == natives  # before: awq-w4g128 and IQ4_XS ranked above them


def test_a_16_bit_checkpoint_has_no_native_quant_to_prefer() -> None:
    plans = compare_plans(load_model("Qwen/Qwen3-8B"), find_gpu("h100-sxm"), context=8192).plans
    assert not any(p.native_quant for p in plans)

"""What `compare_plans` puts first: the checkpoint's own quantization, and the best fitting variant per engine x
quant (KV dtypes and engine knobs tried when --kv-dtype is not given). Issue 16 items 3-4. The search names what it
added as the engine's flags (`fits_with`); one launch as asked (`plan_as_asked`, issue 23 item 2) keeps its own
verdict and offers them as the remedy."""

from __future__ import annotations

from servelab.hardware.gpus import find_gpu
from servelab.model.load import load_model
from servelab.plan.make import added_flags, compare_plans, make_plan, plan_as_asked, search_plan


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


def test_qwen35_27b_on_a_48g_card_finds_sglang_awq_with_an_fp8_kv_cache_at_262144() -> None:
    # issue 16 done-means (the field report's answer); before: sglang awq-w4g128 auto, fits no, 203,715 served
    plans = compare_plans(load_model("Qwen/Qwen3.5-27B"), find_gpu("rtx4090-48g")).plans
    row = next(p for p in plans if p.engine == "sglang" and p.quant.startswith("awq"))
    assert row.fits and row.kv_dtype == "fp8_e5m2" and row.context == row.context_served == 262144
    assert row.searched == ("kv_dtype=fp8_e5m2",)
    assert list(row.command[-2:]) == ["--kv-cache-dtype", "fp8_e5m2"]
    assert row.fits_with == (
        "--kv-cache-dtype",
        "fp8_e5m2",
    )  # sglang's defaults do not fit: the flags it added
    assert row.details["max_total_tokens"] >= 262144  # type: ignore[operator]


def test_search_keeps_an_asked_kv_dtype_and_an_asked_setting() -> None:
    qwen, card = load_model("Qwen/Qwen3.5-27B"), find_gpu("rtx4090-48g")
    asked = compare_plans(qwen, card, engines=("sglang",), quant="awq", kv_dtype="auto").plans[0]
    # the 16-bit cache stays; sglang's own knob makes room: fewer state slots, more KV tokens
    slots = make_plan(qwen, card, engine="sglang", quant="awq", kv_dtype="auto").remedy[
        "max_mamba_cache_size"
    ]
    assert asked.kv_dtype == "auto" and asked.fits and asked.searched == (f"max_mamba_cache_size={slots}",)
    assert asked.command[-2:] == ("--max-mamba-cache-size", str(slots))
    assert asked.fits_with == ("--max-mamba-cache-size", str(slots))
    qwen_4090 = find_gpu("rtx4090")
    kept = search_plan(qwen, qwen_4090, engine="vllm", quant="awq", context=32768, max_num_seqs=200)
    assert not kept.fits and "--max-num-seqs 200" in kept.command_line  # never overridden
    assert kept.fits_with == ()  # nothing the search may change makes it fit


def test_search_applies_the_fix_a_refusal_names() -> None:
    # vLLM's default 256 sequences exceed the Mamba blocks: the variant that fits passes --max-num-seqs N
    qwen, card = load_model("Qwen/Qwen3.5-27B"), find_gpu("rtx4090")
    asked = make_plan(qwen, card, engine="vllm", quant="awq", context=32768)
    found = search_plan(qwen, card, engine="vllm", quant="awq", context=32768)
    n = asked.remedy["max_num_seqs"]
    assert not asked.fits and found.fits and found.searched == (f"max_num_seqs={n}",)
    assert found.command[-2:] == ("--max-num-seqs", str(n))
    assert found.fits_with == ("--max-num-seqs", str(n))


def test_llamacpp_search_tries_quantized_caches_in_order() -> None:
    # Llama-3.1-8B Q8_0 at 131,072 tokens on a 24 GB card: f16 KV (16 GiB) beside 8 GiB of weights does not
    # fit, q8_0 (8.5 GiB) does
    plans = compare_plans(
        load_model("meta-llama/Llama-3.1-8B-Instruct"),
        find_gpu("rtx4090"),
        engines=("llamacpp",),
        quant="Q8_0",
        context=131072,
    ).plans
    assert plans[0].kv_dtype == "q8_0" and plans[0].fits
    assert plans[0].memory_bytes.kv_cache == 32 * 131072 * 2 * (8 * 128 // 32 * 34)  # q8_0: 34 B per 32
    assert plans[0].searched == ("kv_dtype=q8_0",)
    assert "-ctk" in plans[0].command and "-ctv" in plans[0].command
    assert plans[0].fits_with == ("-ctk", "q8_0", "-ctv", "q8_0")


def test_a_launch_as_asked_keeps_its_verdict_and_offers_the_search_as_remedy() -> None:
    # issue 23 item 2: --engine vllm --quant awq, no batch limit: vLLM's default 256 sequences exceed the Mamba
    # blocks; before, `plan` answered with the variant (fits: true, the change only under "searched")
    qwen, card = load_model("Qwen/Qwen3.5-27B"), find_gpu("rtx4090")
    exact = make_plan(qwen, card, engine="vllm", quant="awq", context=32768)
    asked = plan_as_asked(qwen, card, engine="vllm", quant="awq", context=32768)
    n = exact.remedy["max_num_seqs"]
    assert not asked.fits and asked.refusals == exact.refusals and asked.searched == ()
    assert asked.command == exact.command and asked.memory_bytes == exact.memory_bytes  # the launch as asked
    assert asked.fits_with == ("--max-num-seqs", str(n))
    again = make_plan(qwen, card, engine="vllm", quant="awq", context=32768, max_num_seqs=n)
    assert again.fits  # the remedy is what makes it fit


def test_a_launch_as_asked_that_fits_or_cannot_be_helped_has_no_remedy() -> None:
    qwen = load_model("Qwen/Qwen3.5-27B")
    fits = plan_as_asked(qwen, find_gpu("rtx4090-48g"), engine="sglang", quant="awq", context=32768)
    assert fits.fits and fits.fits_with == ()
    hopeless = plan_as_asked(qwen, find_gpu("rtx4090"), engine="sglang", quant="bf16", context=32768)
    assert not hopeless.fits and hopeless.fits_with == ()
    kept = plan_as_asked(
        qwen, find_gpu("rtx4090"), engine="vllm", quant="awq", context=32768, max_num_seqs=200
    )
    assert not kept.fits and kept.fits_with == ()  # a setting the user gave is never the remedy


def test_added_flags_are_the_options_the_asked_command_lacks() -> None:
    asked = ("vllm", "serve", "m", "--max-model-len", "8192", "--max-num-seqs", "256", "-ngl", "-1")
    changed = (*asked[:5], "--max-num-seqs", "64", "-ngl", "-1", "--kv-cache-dtype", "fp8", "--on")
    assert added_flags(asked, changed) == ("--max-num-seqs", "64", "--kv-cache-dtype", "fp8", "--on")
    assert added_flags(asked, asked) == ()

"""vLLM's decode efficiency by weight format family and batch (CUDA), each figure a public measurement:
measured tok/s x bytes read per step (the planner's own, benchmarks/plan_efficiency.py) / the card's bandwidth.
The table, its sources and derivations: docs/planning.md "Decode efficiency"; types: servelab/sizing/efficiency.py.
"""

from __future__ import annotations

from servelab.sizing.efficiency import DecodeMeasurement, EfficiencyCell, EfficiencyTable, hf_math_unit

LLAMA_8B = "meta-llama/Llama-3.1-8B"
# benchmark_latency, Llama3.1-8B on one H100, --input-len 256 --output-len 32, seconds per batch; the latency holds
# the 256-token prefill of every sequence, so these figures are lower bounds (more so at larger batch)
PR_23197 = "https://github.com/vllm-project/vllm/pull/23197"
LATENCY_S = {  # (family, quant priced, batch) -> seconds for 32 output tokens
    ("16-bit", "bf16", 1): 0.236,
    ("16-bit", "bf16", 8): 0.284,
    ("16-bit", "bf16", 16): 0.336,
    ("int8", "int-w8g128-sym", 1): 0.186,
    ("int8", "int-w8g128-sym", 8): 0.248,
    ("int8", "int-w8g128-sym", 16): 0.300,
    ("int4", "int-w4g128-sym", 1): 0.154,
    ("int4", "int-w4g128-sym", 8): 0.216,
    ("int4", "int-w4g128-sym", 16): 0.267,
}
DERIVED = {  # the same keys -> measured tok/s x bytes per step / 3350 GB/s
    ("16-bit", 1): 0.61,
    ("16-bit", 8): 0.51,
    ("16-bit", 16): 0.44,
    ("int8", 1): 0.42,
    ("int8", 8): 0.32,
    ("int8", 16): 0.28,
    ("int4", 1): 0.29,
    ("int4", 8): 0.22,
    ("int4", 16): 0.19,
}


def _latency_cells() -> tuple[EfficiencyCell, ...]:
    return tuple(
        EfficiencyCell(
            family,
            batch,
            DERIVED[(family, batch)],
            DecodeMeasurement(
                tok_s=32 / seconds,
                gpu="h100-sxm",
                model=LLAMA_8B,
                quant=quant,
                url=PR_23197,
                context=256 + 16,
                kv_dtype="bf16",
            ),
            f"benchmark_latency, batch {batch}: 32 tokens in {seconds} s (Marlin kernels for int8/int4)",
        )
        for (family, quant, batch), seconds in LATENCY_S.items()
    )


QWEN3_4B_FP8_BYTES = 4.484e9  # 3.63e9 fp8 linear + 0.778e9 bf16 tied lm_head + 500 tokens x 147,456 B bf16 KV
CELLS = (
    *_latency_cells(),
    EfficiencyCell(
        "fp8",
        1,
        0.62,
        DecodeMeasurement(
            tok_s=138.49,
            gpu="rtx4090",
            model="Qwen/Qwen3-4B-Instruct-2507-FP8",
            quant="fp8",
            url="https://github.com/noonghunna/club-3090/issues/697",
            context=500,
            bytes_per_token=QWEN3_4B_FP8_BYTES,
        ),
        "single stream, 1000 tokens generated; bytes by hand (36 layers x 100.9M fp8 weights, the tied 151,936 x"
        " 2560 lm_head in bf16, KV of the 500 tokens on average)",
    ),
    EfficiencyCell(
        "fp4",
        1,
        0.16,
        DecodeMeasurement(
            tok_s=90.0,
            gpu="a100-80g",
            model="openai/gpt-oss-120b",
            quant="mxfp4",
            url="https://github.com/vllm-project/vllm/issues/22331",
            context=512,
            kv_dtype="bf16",
        ),
        "gpt-oss-120b MXFP4 on one A100 80GB (no FP4 units: the Marlin MXFP4 path), TRITON_ATTN backend",
    ),
)

TABLE = EfficiencyTable(
    engine="vLLM",
    default=0.8,
    default_note="the field report's 'close to the ceiling' for a CUDA-graph engine, docs/reference/field-report.md §2",
    cells=CELLS,
    math_unit=hf_math_unit,
    eager_flags=("enforce_eager",),
)

"""llama.cpp's decode efficiency by weight format family and batch (CUDA), each figure a public measurement:
measured tok/s x bytes read per step (the planner's own, benchmarks/plan_efficiency.py) / the card's bandwidth.
The table, its sources and derivations: docs/planning.md "Decode efficiency"; types: servelab/sizing/efficiency.py.
"""

from __future__ import annotations

from servelab.hardware.gpus import GPU
from servelab.sizing.efficiency import DecodeMeasurement, EfficiencyCell, EfficiencyTable

LLAMA_8B = "meta-llama/Llama-3.1-8B"  # the catalog's Llama-3.1-8B: the shapes of Llama-3-8B the PRs measured
QWEN35_27B = "Qwen/Qwen3.5-27B"
PR_15131 = "https://github.com/ggml-org/llama.cpp/pull/15131"
PR_15802 = "https://github.com/ggml-org/llama.cpp/pull/15802"
PR_8215 = "https://github.com/ggml-org/llama.cpp/pull/8215"
QWEN35_4090 = "https://tianchengwu.com/2026/04/05/Running-Qwen-3.5-27B-on-RTX-4090"
FIELD_REPORT = "docs/reference/field-report.md §6"

CELLS = (
    EfficiencyCell(
        "16-bit",
        1,
        0.97,
        DecodeMeasurement(tok_s=65.2, gpu="rtx4090", model=LLAMA_8B, quant="bf16", url=PR_15131),
        "llama-bench BF16, ubatch 1",
    ),
    EfficiencyCell(
        "q4_0",
        1,
        0.73,
        DecodeMeasurement(tok_s=156.56, gpu="rtx3090", model=LLAMA_8B, quant="Q4_0", url=PR_15802),
        "llama-bench, ubatch 1",
    ),
    EfficiencyCell(
        "q4_0",
        8,
        0.34,
        DecodeMeasurement(tok_s=583.77 / 8, gpu="rtx3090", model=LLAMA_8B, quant="Q4_0", url=PR_15802),
        "llama-bench ubatch 8: 583.77 t/s for 8 tokens a step",
    ),
    EfficiencyCell(
        "q4_k",
        1,
        0.62,
        DecodeMeasurement(
            tok_s=39.3,
            gpu="rtx4090",
            model=QWEN35_27B,
            quant="Q4_K_M",
            url=QWEN35_4090,
            context=1024,
            kv_dtype="q4_0",
        ),
        "llama-server, 2K context half filled, q4_0 KV (docs/reference/memory.md §9 V1)",
    ),
    EfficiencyCell(
        "q5_k",
        1,
        0.63,
        DecodeMeasurement(
            tok_s=34.2,
            gpu="rtx4090",
            model=QWEN35_27B,
            quant="Q5_K_M",
            url=QWEN35_4090,
            context=1024,
            kv_dtype="q4_0",
        ),
        "llama-server, 2K context half filled, q4_0 KV (§9 V2)",
    ),
    EfficiencyCell(
        "q6_k",
        1,
        0.57,
        DecodeMeasurement(
            tok_s=93.0,
            gpu="rtx4090",
            model=LLAMA_8B,
            quant="Q6_K",
            url="https://github.com/dmatora/LLM-inference-speed-benchmarks/issues/10",
        ),
        "llama-server generation speed, Llama-3-8B Q6_K",
    ),
    EfficiencyCell(
        "iq",
        1,
        0.67,
        DecodeMeasurement(tok_s=235.58, gpu="rtx4090", model=LLAMA_8B, quant="IQ3_XXS", url=PR_8215),
        "llama-bench IQ3_XXS, ubatch 1",
    ),
    EfficiencyCell(
        "iq",
        8,
        0.41,
        DecodeMeasurement(tok_s=1162.57 / 8, gpu="rtx4090", model=LLAMA_8B, quant="IQ3_XXS", url=PR_8215),
        "llama-bench IQ3_XXS, ubatch 8",
    ),
    EfficiencyCell(
        "ptq1_0",
        1,
        0.19,
        DecodeMeasurement(
            tok_s=31.0,
            gpu="rtx4090-48g",
            model=QWEN35_27B,
            quant="PTQ1_0",
            url=FIELD_REPORT,
            context=1024,
            kv_dtype="q8_0",
        ),
        "the field report's deployment (PrismML fork, llama-server -np 4): 27-35 tok/s, midpoint 31",
    ),
    EfficiencyCell(
        "pq2_0",
        1,
        0.22,
        None,
        "derived: PQ2_0 decodes at 84.85 / 85.98 of PTQ1_0's speed on an RTX 4090"
        " (https://github.com/PrismML-Eng/Bonsai-demo community-benchmarks/bonsai2/cuda-rtx4090-windows.md), so"
        " 0.19 x 0.987 x 7.22 / 6.02 GB per token",
    ),
)


def math_unit(family: str, backend: str, gpu: GPU) -> str:
    """The math units llama.cpp's matmuls run on: on CUDA and ROCm, quantized weights go through MMQ (the
    activations quantized to 8 bits, int8 tensor-core / MFMA products: ggml-cuda/mmq.cuh) where the card has
    int8 tensor throughput; 16-bit weights through cuBLAS / hipBLAS at 16 bits; Metal and Vulkan multiply in
    fp16 (ggml-metal simdgroup matrices, Vulkan cooperative matrices)."""
    if family == "16-bit":
        return "bf16" if backend == "cuda" else "fp16"
    if backend in ("cuda", "rocm") and gpu.int8_tflops:
        return "int8"
    return "fp16"


TABLE = EfficiencyTable(
    engine="llama.cpp",
    default=0.65,
    default_note="docs/reference/memory.md §7: llama.cpp reaches 0.6-0.9",
    cells=CELLS,
    math_unit=math_unit,
)

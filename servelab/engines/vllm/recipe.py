"""The vLLM launch command a plan emits (vllm serve flags) and its container image."""

from __future__ import annotations

from servelab.engines.vllm.memory import KV_DTYPES
from servelab.model.dtypes import engine_spelling

IMAGE = "vllm/vllm-openai:latest"
DEFAULT_PORT = 8000
HEALTH_PATH = "/health"
QUANTIZATION_FLAGS = {
    "awq": "awq_marlin",
    "gptq": "gptq_marlin",
    "fp8": "fp8",
    "fp8-block": "fp8",
    "mxfp4": "mxfp4",
    "nvfp4": "modelopt_fp4",
}


def quantization_flag(quant: str) -> str | None:
    family = quant.lower().split("-w")[0]
    return QUANTIZATION_FLAGS.get(quant.lower()) or QUANTIZATION_FLAGS.get(family)


def command(
    model_path: str,
    *,
    quant: str,
    max_model_len: int,
    kv_cache_dtype: str,
    tp: int = 1,
    gpu_memory_utilization: float | None = None,
    max_num_seqs: int | None = None,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
) -> list[str]:
    """argv for vLLM; pass it through shlex.join to print it."""
    argv = [
        "vllm",
        "serve",
        model_path,
        "--host",
        host,
        "--port",
        str(port),
        "--max-model-len",
        str(max_model_len),
    ]
    flag = quantization_flag(quant)
    if flag:
        argv += ["--quantization", flag]
    if kv_cache_dtype != "auto":
        argv += ["--kv-cache-dtype", engine_spelling(kv_cache_dtype, KV_DTYPES) or kv_cache_dtype]
    if gpu_memory_utilization is not None:
        argv += ["--gpu-memory-utilization", f"{gpu_memory_utilization:g}"]
    if max_num_seqs:
        argv += ["--max-num-seqs", str(max_num_seqs)]
    if tp > 1:
        argv += ["--tensor-parallel-size", str(tp)]
    return argv

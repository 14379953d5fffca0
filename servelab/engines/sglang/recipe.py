"""The sglang launch command a plan emits (python -m sglang.launch_server flags) and its container image."""

from __future__ import annotations

IMAGE = "lmsysorg/sglang:latest"
DEFAULT_PORT = 30000
HEALTH_PATH = "/health"
QUANTIZATION_FLAGS = {
    "awq": "awq",
    "gptq": "gptq",
    "fp8": "fp8",
    "fp8-block": "fp8",
    "mxfp4": "mxfp4",
    "nvfp4": "modelopt_fp4",
}


def quantization_flag(quant: str) -> str | None:
    """--quantization value for a servelab quant name (None: bf16/fp16, nothing to pass)."""
    family = quant.lower().split("-w")[0]
    return QUANTIZATION_FLAGS.get(quant.lower()) or QUANTIZATION_FLAGS.get(family)


def command(
    model_path: str,
    *,
    quant: str,
    context_length: int,
    kv_cache_dtype: str,
    tp: int = 1,
    max_total_tokens: int | None = None,
    mem_fraction_static: float | None = None,
    max_mamba_cache_size: int | None = None,
    max_running_requests: int | None = None,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
) -> list[str]:
    """argv for sglang; pass it through shlex.join to print it."""
    argv = [
        "python",
        "-m",
        "sglang.launch_server",
        "--model-path",
        model_path,
        "--host",
        host,
        "--port",
        str(port),
    ]
    flag = quantization_flag(quant)
    if flag:
        argv += ["--quantization", flag]
    argv += ["--context-length", str(context_length)]
    if max_total_tokens:
        argv += ["--max-total-tokens", str(max_total_tokens)]
    if kv_cache_dtype != "auto":
        argv += ["--kv-cache-dtype", kv_cache_dtype]
    if mem_fraction_static is not None:
        argv += ["--mem-fraction-static", f"{mem_fraction_static:g}"]
    if max_running_requests:
        argv += ["--max-running-requests", str(max_running_requests)]
    if max_mamba_cache_size:
        argv += ["--max-mamba-cache-size", str(max_mamba_cache_size)]
    if tp > 1:
        argv += ["--tp", str(tp)]
    return argv

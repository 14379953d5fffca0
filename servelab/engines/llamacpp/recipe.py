"""The llama-server launch command a plan emits and its container image."""

from __future__ import annotations

IMAGE = "ghcr.io/ggml-org/llama.cpp:server-cuda"
DEFAULT_PORT = 8080
HEALTH_PATH = "/health"


def gguf_path(model_path: str, quant: str) -> str:
    """The -m argument: the .gguf itself, or a placeholder path named after a catalog id and quant."""
    if model_path.lower().endswith(".gguf"):
        return model_path
    return f"models/{model_path.rstrip('/').split('/')[-1]}-{quant}.gguf"


def command(
    model_path: str,
    *,
    n_ctx: int,
    quant: str = "",
    n_parallel: int = 1,
    kv_unified: bool = False,
    cache_type_k: str = "f16",
    cache_type_v: str = "f16",
    n_gpu_layers: int | None = None,
    flash_attn: bool = True,
    tp: int = 1,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
) -> list[str]:
    """argv for llama-server; pass it through shlex.join to print it. -np is always explicit (the default is 4
    slots sharing one unified pool)."""
    argv = [
        "llama-server",
        "-m",
        gguf_path(model_path, quant),
        "--host",
        host,
        "--port",
        str(port),
        "-c",
        str(n_ctx),
        "-np",
        str(n_parallel),
        "-ngl",
        str(999 if n_gpu_layers is None else n_gpu_layers),
        "-fa",
        "on" if flash_attn else "off",
    ]
    if kv_unified:
        argv.append("--kv-unified")
    if cache_type_k != "f16":
        argv += ["-ctk", cache_type_k]
    if cache_type_v != "f16":
        argv += ["-ctv", cache_type_v]
    if tp > 1:  # llama.cpp splits by layers (pipeline), not tensor parallel
        argv += ["--split-mode", "layer", "--tensor-split", ",".join(["1"] * tp)]
    return argv

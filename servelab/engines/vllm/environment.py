"""vLLM's environment: switches that change its multi-GPU path, and where it caches its P2P test.

Sources: vllm/envs.py and vllm/distributed/device_communicators/custom_all_reduce_utils.py
(docs/reference/diagnostics.md §2).
"""

from __future__ import annotations

from collections.abc import Mapping

# name -> (the value that switches it on, what that does)
ENV_SWITCHES = {
    "VLLM_SKIP_P2P_CHECK": (
        "1",
        "vLLM trusts the driver's P2P report instead of testing a real CUDA IPC copy",
    ),
    "VLLM_DISABLE_PYNCCL": ("1", "vLLM falls back from PyNCCL to torch.distributed for collectives"),
    "VLLM_ALLREDUCE_USE_SYMM_MEM": ("0", "vLLM's symmetric-memory all-reduce is off"),
    "VLLM_DISABLE_CUSTOM_ALL_REDUCE": (
        "1",
        "a launcher convention (not read by vLLM itself) for --disable-custom-all-reduce",
    ),
}


def p2p_cache_glob(env: Mapping[str, str], cache_home: str) -> str:
    """The files where vLLM caches its GPU P2P test results."""
    root = env.get("VLLM_CACHE_ROOT") or f"{cache_home}/vllm"
    return f"{root}/gpu_p2p_access_cache_for_*.json"

"""sglang's environment: switches that change its multi-GPU path, and where it caches its P2P test.

Sources: python/sglang/srt/distributed/device_communicators/custom_all_reduce_utils.py
(docs/reference/diagnostics.md §2).
"""

from __future__ import annotations

from collections.abc import Mapping

# name -> (the value that switches it on, what that does)
ENV_SWITCHES = {
    "SGLANG_SKIP_P2P_CHECK": (
        "1",
        "sglang trusts the driver's P2P report instead of testing a real CUDA IPC copy",
    ),
    "SGLANG_DISABLE_CUSTOM_ALL_REDUCE": (
        "1",
        "a launcher convention (not read by sglang itself) for --disable-custom-all-reduce",
    ),
}


def p2p_cache_glob(env: Mapping[str, str], cache_home: str) -> str:
    """The files where sglang caches its GPU P2P test results."""
    return f"{cache_home}/sglang/gpu_p2p_access_cache_for_*.json"

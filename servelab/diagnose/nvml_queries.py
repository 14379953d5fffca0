"""NVML calls behind `RealProbe.gpu` / `RealProbe.pair`: one named query → one nvidia-ml-py call.

Each answer is a plain number or string; a call the GPU or driver does not support (NVMLError) gives None.
The P2P capability indices are written as numbers because nvidia-ml-py 13.x defines
``NVML_P2P_CAPS_INDEX_READ`` as the tuple ``(0,)`` (a trailing comma in its source).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

P2P_CAPS_INDEX = {"p2p_read": 0, "p2p_write": 1, "p2p_nvlink": 2}  # NVML_P2P_CAPS_INDEX_READ/WRITE/NVLINK


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _cuda_version(raw: int) -> str:
    return f"{raw // 1000}.{raw % 1000 // 10}"


def _nvlink_links(nv: Any, handle: Any) -> int | None:
    active = 0
    for link in range(int(nv.NVML_NVLINK_MAX_LINKS)):
        try:
            if nv.nvmlDeviceGetNvLinkState(handle, link) == nv.NVML_FEATURE_ENABLED:
                active += 1
        except nv.NVMLError_NotSupported:
            return None if link == 0 else active
        except nv.NVMLError:
            break
    return active


def _gpu_calls(nv: Any) -> dict[str, Callable[[Any], Any]]:
    return {
        "name": lambda h: _text(nv.nvmlDeviceGetName(h)),
        "uuid": lambda h: _text(nv.nvmlDeviceGetUUID(h)),
        "bus_id": lambda h: _text(nv.nvmlDeviceGetPciInfo(h).busId),
        "memory_total_bytes": lambda h: int(nv.nvmlDeviceGetMemoryInfo(h).total),
        "memory_used_bytes": lambda h: int(nv.nvmlDeviceGetMemoryInfo(h).used),
        "driver_version": lambda h: _text(nv.nvmlSystemGetDriverVersion()),
        "cuda_driver_version": lambda h: _cuda_version(nv.nvmlSystemGetCudaDriverVersion()),
        "power_limit_mw": lambda h: int(nv.nvmlDeviceGetEnforcedPowerLimit(h)),
        "power_default_limit_mw": lambda h: int(nv.nvmlDeviceGetPowerManagementDefaultLimit(h)),
        "power_usage_mw": lambda h: int(nv.nvmlDeviceGetPowerUsage(h)),
        "sm_clock_mhz": lambda h: int(nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)),
        "mem_clock_mhz": lambda h: int(nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM)),
        "max_sm_clock_mhz": lambda h: int(nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_SM)),
        "max_mem_clock_mhz": lambda h: int(nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_MEM)),
        "pcie_gen_current": lambda h: int(nv.nvmlDeviceGetCurrPcieLinkGeneration(h)),
        "pcie_gen_max": lambda h: int(nv.nvmlDeviceGetMaxPcieLinkGeneration(h)),
        "pcie_width_current": lambda h: int(nv.nvmlDeviceGetCurrPcieLinkWidth(h)),
        "pcie_width_max": lambda h: int(nv.nvmlDeviceGetMaxPcieLinkWidth(h)),
        "virtualization_mode": lambda h: int(nv.nvmlDeviceGetVirtualizationMode(h)),
        "nvlink_active_links": lambda h: _nvlink_links(nv, h),
        "sm_util_pct": lambda h: int(nv.nvmlDeviceGetUtilizationRates(h).gpu),
        "mem_util_pct": lambda h: int(nv.nvmlDeviceGetUtilizationRates(h).memory),
    }


def gpu_query(nv: Any, index: int, query: str) -> Any:
    """One answer about GPU `index` (NVML order), or None when unsupported."""
    try:
        handle = nv.nvmlDeviceGetHandleByIndex(index)
        return _gpu_calls(nv)[query](handle)
    except nv.NVMLError:
        return None


def pair_query(nv: Any, a: int, b: int, query: str) -> int | None:
    """NVML P2P status code (0 = OK) or common-ancestor level (10 PIX … 50 SYS) for GPUs `a`, `b`."""
    try:
        ha, hb = nv.nvmlDeviceGetHandleByIndex(a), nv.nvmlDeviceGetHandleByIndex(b)
        if query == "common_ancestor":
            return int(nv.nvmlDeviceGetTopologyCommonAncestor(ha, hb))
        return int(nv.nvmlDeviceGetP2PStatus(ha, hb, P2P_CAPS_INDEX[query]))
    except nv.NVMLError:
        return None

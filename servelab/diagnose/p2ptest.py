"""Optional real P2P test (`servelab doctor --p2p-test`): a two-process CUDA IPC copy, as vLLM and sglang do it.

The driver's P2P report can say yes while peer access is broken (vllm#2728), so the engines test for real:
process A fills a buffer on GPU a and exports a CUDA IPC handle; process B, on GPU b, opens it (peer
mapping), checks the bytes and overwrites them; A checks B's bytes. Runs only when torch with CUDA is
importable (it loads the CUDA runtime) and two GPUs are visible; otherwise the result says why it was skipped.
"""

from __future__ import annotations

import ctypes
import importlib.util
import multiprocessing
from dataclasses import dataclass

from servelab.diagnose.findings import Finding

BUFFER_BYTES = 1 << 20
IPC_HANDLE_BYTES = 64
LAZY_ENABLE_PEER_ACCESS = 1  # cudaIpcMemLazyEnablePeerAccess
DEVICE_TO_HOST = 2  # cudaMemcpyDeviceToHost


@dataclass(frozen=True)
class P2PTestResult:
    gpu_a: int
    gpu_b: int
    status: str  # ok | failed | skipped
    detail: str = ""


class _IpcHandle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_byte * IPC_HANDLE_BYTES)]  # cudaIpcMemHandle_t, passed by value to Open


def _cudart() -> ctypes.CDLL:
    """The CUDA runtime torch loaded into this process (found in /proc/self/maps, as vLLM does)."""
    import torch

    torch.cuda.init()
    with open("/proc/self/maps", encoding="utf-8") as maps:
        paths = [line.split()[-1] for line in maps if "libcudart" in line]
    if not paths:
        raise RuntimeError("torch did not load libcudart")
    lib = ctypes.CDLL(paths[0])
    vp, size = ctypes.c_void_p, ctypes.c_size_t
    lib.cudaMalloc.argtypes = [ctypes.POINTER(vp), size]
    lib.cudaMemset.argtypes = [vp, ctypes.c_int, size]
    lib.cudaMemcpy.argtypes = [vp, vp, size, ctypes.c_int]
    lib.cudaIpcGetMemHandle.argtypes = [ctypes.POINTER(_IpcHandle), vp]
    lib.cudaIpcOpenMemHandle.argtypes = [ctypes.POINTER(vp), _IpcHandle, ctypes.c_uint]
    return lib


def _check(code: int, what: str) -> None:
    if code != 0:
        raise RuntimeError(f"{what} failed with CUDA error {code}")


def _expect(lib: ctypes.CDLL, pointer: ctypes.c_void_p, byte: int) -> bool:
    host = (ctypes.c_char * BUFFER_BYTES)()
    _check(
        lib.cudaMemcpy(ctypes.cast(host, ctypes.c_void_p), pointer, BUFFER_BYTES, DEVICE_TO_HOST),
        "cudaMemcpy",
    )
    return host.raw == bytes([byte]) * BUFFER_BYTES


def _producer(gpu: int, conn) -> None:
    try:
        lib, pointer = _cudart(), ctypes.c_void_p()
        _check(lib.cudaSetDevice(gpu), "cudaSetDevice")
        _check(lib.cudaMalloc(ctypes.byref(pointer), BUFFER_BYTES), "cudaMalloc")
        _check(lib.cudaMemset(pointer, 1, BUFFER_BYTES), "cudaMemset")
        _check(lib.cudaDeviceSynchronize(), "cudaDeviceSynchronize")
        handle = _IpcHandle()
        _check(lib.cudaIpcGetMemHandle(ctypes.byref(handle), pointer), "cudaIpcGetMemHandle")
        conn.send(bytes(handle))
        conn.recv()  # the consumer has written its bytes
        conn.send("ok" if _expect(lib, pointer, 2) else "producer read wrong bytes back")
    except Exception as exc:
        conn.send(f"producer: {exc}")


def _consumer(gpu: int, handle_bytes: bytes, conn) -> None:
    try:
        lib, pointer = _cudart(), ctypes.c_void_p()
        _check(lib.cudaSetDevice(gpu), "cudaSetDevice")
        handle = _IpcHandle.from_buffer_copy(handle_bytes)
        _check(
            lib.cudaIpcOpenMemHandle(ctypes.byref(pointer), handle, LAZY_ENABLE_PEER_ACCESS),
            "cudaIpcOpenMemHandle",
        )
        ok = _expect(lib, pointer, 1)
        _check(lib.cudaMemset(pointer, 2, BUFFER_BYTES), "cudaMemset")
        _check(lib.cudaDeviceSynchronize(), "cudaDeviceSynchronize")
        conn.send("ok" if ok else "consumer read wrong bytes through the peer mapping")
    except Exception as exc:
        conn.send(f"consumer: {exc}")


def _test_pair(a: int, b: int, timeout_s: float) -> P2PTestResult:
    ctx = multiprocessing.get_context("spawn")
    to_producer, producer_end = ctx.Pipe()
    to_consumer, consumer_end = ctx.Pipe()
    processes = [ctx.Process(target=_producer, args=(a, producer_end), daemon=True)]
    processes[0].start()
    try:
        if not to_producer.poll(timeout_s):
            return P2PTestResult(a, b, "failed", "producer timed out")
        handle = to_producer.recv()
        if isinstance(handle, str):
            return P2PTestResult(a, b, "failed", handle)
        processes.append(ctx.Process(target=_consumer, args=(b, handle, consumer_end), daemon=True))
        processes[1].start()
        verdict = to_consumer.recv() if to_consumer.poll(timeout_s) else "consumer timed out (P2P hang?)"
        to_producer.send("done")
        back = to_producer.recv() if to_producer.poll(timeout_s) else "producer timed out"
        ok = verdict == "ok" and back == "ok"
        return P2PTestResult(a, b, "ok" if ok else "failed", "" if ok else f"{verdict}; {back}")
    finally:
        for process in processes:  # only the processes this test started
            process.join(5)
            if process.is_alive():
                process.kill()


def skip_reason(gpu_count: int) -> str | None:
    """Why the test cannot run here, or None when it can."""
    if importlib.util.find_spec("torch") is None:
        return "torch is not installed (the test loads the CUDA runtime through torch)"
    if gpu_count < 2:
        return f"it needs two GPUs, NVML sees {gpu_count}"
    return None


def run_p2p_test(gpu_count: int, timeout_s: float = 60.0) -> list[P2PTestResult]:
    """The real IPC test for GPU0 with every other GPU (both directions); one skipped result when it cannot run."""
    reason = skip_reason(gpu_count)
    if reason is not None:
        return [P2PTestResult(0, 1, "skipped", reason)]
    pairs = [(0, other) for other in range(1, gpu_count)] + [(other, 0) for other in range(1, gpu_count)]
    return [_test_pair(a, b, timeout_s) for a, b in pairs]


def p2p_test_findings(results: list[P2PTestResult]) -> list[Finding]:
    """Skipped → info; failed → critical (engines would hang or compute garbage with custom all-reduce)."""
    skipped = [r for r in results if r.status == "skipped"]
    failed = [r for r in results if r.status == "failed"]
    findings = [
        Finding(
            id="p2p-test-skipped",
            severity="info",
            title=f"Real P2P test skipped: {r.detail}",
            evidence="servelab doctor --p2p-test",
            consequence="Only the driver's P2P report was checked.",
            fix="Run it on a machine with two GPUs and torch with CUDA.",
        )
        for r in skipped
    ]
    if failed:
        findings.append(
            Finding(
                id="p2p-test-failed",
                severity="critical",
                title="A real CUDA IPC peer copy failed",
                evidence="; ".join(f"GPU{r.gpu_a}→GPU{r.gpu_b}: {r.detail}" for r in failed),
                consequence="Custom all-reduce over this path hangs or returns wrong data; NCCL P2P may hang.",
                fix="Disable custom all-reduce (--disable-custom-all-reduce) and set NCCL_P2P_DISABLE=1 until the "
                "driver/BIOS/hypervisor issue is fixed; delete the engines' gpu_p2p_access_cache files afterwards.",
            )
        )
    passed = [r for r in results if r.status == "ok"]
    if passed:
        findings.append(
            Finding(
                id="p2p-test-ok",
                severity="info",
                title=f"Real CUDA IPC peer copies passed ({len(passed)})",
                evidence="; ".join(f"GPU{r.gpu_a}→GPU{r.gpu_b}" for r in passed),
                consequence="The engines' own P2P test should pass too.",
                fix="Nothing to do.",
            )
        )
    return findings

"""Tensor-parallel cost: every layer all-reduces its attention and MLP outputs, twice per layer per token.

volume per token = 2 x layers x hidden x 2 bytes (bf16 activations); a ring all-reduce over N GPUs moves
2 (N-1) / N of it through each GPU's link, and each call pays a fixed latency. The links (per direction):
- nvlink:           the card's NVLink bandwidth / 2, ~5 us per call (custom all-reduce)
- pcie-p2p:         x16 PCIe at ~80% of theoretical, ~15 us per call (NCCL over P2P)
- pcie-host-staged: no peer access (KVM, NCCL_P2P_DISABLE=1): GPU -> host -> GPU halves the bandwidth,
                    ~150 us per call: chosen so that the field report holds (docs/reference/field-report.md §2: on
                    2 x 4090 48 GB under KVM one card decoded Qwen3.5-27B more than 1.5x faster than TP=2)
Latencies are order-of-magnitude figures; they decide whether TP pays off, because decode sends ~2 x layers
tiny messages per token.
"""

from __future__ import annotations

from dataclasses import dataclass

from servelab.errors import ConfigError
from servelab.hardware.gpus import GPU, INTERCONNECTS
from servelab.model.spec import ModelSpec

LATENCY_S = {"nvlink": 5e-6, "pcie-p2p": 15e-6, "pcie-host-staged": 150e-6}
ACTIVATION_BYTES = 2


@dataclass(frozen=True, kw_only=True)
class TensorParallelCost:
    tp: int
    interconnect: str
    link_gb_s: float
    allreduces_per_token: int
    bytes_per_allreduce: int
    allreduce_s: float  # one call
    per_token_s: float  # all calls for one decode step (batch 1)


def link_bandwidth_gb_s(gpu: GPU, interconnect: str) -> float:
    if interconnect not in INTERCONNECTS:
        raise ConfigError(f"unknown interconnect {interconnect!r}; choose one of: {', '.join(INTERCONNECTS)}")
    if interconnect == "nvlink":
        if not gpu.nvlink_gb_s:
            raise ConfigError(f"{gpu.name} has no NVLink; use --interconnect pcie-p2p or pcie-host-staged")
        return gpu.nvlink_gb_s / 2
    pcie = gpu.pcie_gb_s * 0.8
    return pcie if interconnect == "pcie-p2p" else pcie / 2


def tensor_parallel_cost(
    model: ModelSpec, gpu: GPU, tp: int, interconnect: str, *, batch: int = 1
) -> TensorParallelCost:
    """All-reduce time per decode step for `batch` sequences over `tp` GPUs."""
    link = link_bandwidth_gb_s(gpu, interconnect)
    calls = 2 * model.num_layers
    size = model.hidden_size * ACTIVATION_BYTES * batch
    one = LATENCY_S[interconnect] + 2 * (tp - 1) / tp * size / (link * 1e9) if tp > 1 else 0.0
    return TensorParallelCost(
        tp=tp,
        interconnect=interconnect,
        link_gb_s=link,
        allreduces_per_token=calls,
        bytes_per_allreduce=size,
        allreduce_s=one,
        per_token_s=calls * one,
    )

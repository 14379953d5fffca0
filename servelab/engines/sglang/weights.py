"""What sglang's weights take on a GPU beyond the checkpoint's bytes: the MXFP4 MoE layout pads the experts.

Rule (sgl-project/sglang python/sglang/srt/layers/quantization/mxfp4.py `Mxfp4MoEMethod.create_weights`, October
2025; docs/reference/memory.md §2): w13 is [E, 2 x I_pad, H_pad / 2] and w2 [E, H_pad, I_pad / 2] uint8 with one
uint8 scale per 32 values, I = intermediate_size_per_partition (moe_intermediate_size / tp). On SM100 (Blackwell,
where sglang's default MoE runner for MXFP4 is flashinfer's) I and H are rounded up to 256; on Hopper (triton
kernels) they stay as they are. (ROCm rounds I to 128; the catalog does not say which cards are ROCm, so that
padding, 2.2% for gpt-oss, is not planned.) gpt-oss (I = H = 2880) on a B200: 3072 x 3072, 13.8% more
expert bytes.
"""

from __future__ import annotations

from servelab.hardware.gpus import GPU
from servelab.model.quant import get_quant
from servelab.model.spec import ModelSpec

SM100_PAD = 256  # flashinfer MXFP4 MoE: round_up(intermediate, 256), round_up(hidden, 256)


def _round_up(n: int, to: int) -> int:
    return (n + to - 1) // to * to


def _padding(gpu: GPU) -> tuple[int, int] | None:
    """(intermediate, hidden) alignment of the MXFP4 MoE weights on this card; None: not padded."""
    if gpu.compute_capability is not None and gpu.compute_capability.startswith("10."):
        return SM100_PAD, SM100_PAD
    return None


def mxfp4_moe_padding_bytes(model: ModelSpec, gpu: GPU, *, tp: int = 1) -> int:
    """Extra bytes per GPU the MXFP4 MoE layout adds to the routed experts (0 for other formats or cards):
    layers x E x 3 (gate, up, down) x (I_pad x H_pad - I x H) values at MXFP4's 4.25 bits."""
    moe = model.moe
    align = _padding(gpu)
    if moe is None or model.quant.lower() != "mxfp4" or align is None:
        return 0
    inter, hidden = moe.expert_intermediate_size // max(1, tp), model.hidden_size
    padded = _round_up(inter, align[0]) * _round_up(hidden, align[1])
    layers = moe.num_moe_layers or model.num_layers
    extra_values = layers * moe.num_experts * 3 * (padded - inter * hidden)
    return int(extra_values * get_quant("mxfp4").bits_per_weight / 8)

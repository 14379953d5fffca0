"""Fixed per-sequence state of linear-attention (Gated DeltaNet) and Mamba layers: a conv window and an SSM state.

S(seq) = n_recurrent_layers x [conv_dim x (K - 1 + spec_tokens) x conv_bytes + ssm_elements x ssm_bytes]
Each engine stores the parts in its own dtypes: sglang/vLLM conv in the model dtype (bf16) and SSM in the config's
`mamba_ssm_dtype` (fp32 for Qwen3.5/Next); llama.cpp both in f32. Source: docs/reference/memory.md §2-4, §8.
"""

from __future__ import annotations

from dataclasses import dataclass

from servelab.model.dtypes import bytes_per_element
from servelab.model.spec import RECURRENT_KINDS, ModelSpec


@dataclass(frozen=True)
class StateLayout:
    conv_bytes_per_layer: int
    ssm_bytes_per_layer: int
    layers: int

    @property
    def bytes_per_layer(self) -> int:
        return self.conv_bytes_per_layer + self.ssm_bytes_per_layer

    @property
    def bytes_per_sequence(self) -> int:
        return self.bytes_per_layer * self.layers


def _dims(model: ModelSpec) -> tuple[int, int, int, str] | None:
    """(conv_dim, conv_kernel, ssm_elements, ssm_dtype) of the model's recurrent layers."""
    if model.linear_attention is not None:
        la = model.linear_attention
        return la.conv_dim, la.conv_kernel, la.ssm_elements, la.ssm_dtype
    if model.mamba is not None:
        m = model.mamba
        return m.conv_dim, m.d_conv, m.ssm_elements, m.ssm_dtype
    return None


def state_layout(
    model: ModelSpec, *, conv_dtype: str | None = None, ssm_dtype: str | None = None, spec_tokens: int = 0
) -> StateLayout:
    """Per-sequence recurrent state; dtypes default to the model dtype (conv) and `mamba_ssm_dtype` (SSM)."""
    dims = _dims(model)
    layers = sum(1 for k in model.layer_kinds if k in RECURRENT_KINDS)
    if dims is None or layers == 0:
        return StateLayout(0, 0, 0)
    conv_dim, kernel, ssm_elements, model_ssm_dtype = dims
    conv = conv_dim * (kernel - 1 + spec_tokens) * bytes_per_element(conv_dtype or model.dtype)
    ssm = ssm_elements * bytes_per_element(ssm_dtype or model_ssm_dtype)
    return StateLayout(int(conv), int(ssm), layers)

"""Model description: one `ModelSpec` type, built from a HF config, a GGUF file or the bundled catalog."""

from servelab.model.load import load_model
from servelab.model.spec import (
    AttentionSpec,
    LayerKind,
    LinearAttentionSpec,
    MambaSpec,
    MLASpec,
    ModelSpec,
    MoESpec,
    WeightGroup,
)

__all__ = [
    "AttentionSpec",
    "LayerKind",
    "LinearAttentionSpec",
    "MLASpec",
    "MambaSpec",
    "MoESpec",
    "ModelSpec",
    "WeightGroup",
    "load_model",
]

"""Random weights written into a GGUF file: seeded, in the shape's weight type, quantized with gguf.quants."""

from __future__ import annotations

import gguf
import numpy as np

QUANT_TYPES = {"q8_0": gguf.GGMLQuantizationType.Q8_0, "q4_0": gguf.GGMLQuantizationType.Q4_0}
FILE_TYPES = {
    "f32": gguf.LlamaFileType.ALL_F32,
    "f16": gguf.LlamaFileType.MOSTLY_F16,
    "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0,
    "q4_0": gguf.LlamaFileType.MOSTLY_Q4_0,
}
WEIGHT_SCALE = 0.02


class TensorSink:
    """Adds seeded random tensors to a GGUFWriter and counts parameters. numpy shapes are (out, in)."""

    def __init__(self, writer: gguf.GGUFWriter, weight_type: str, seed: int) -> None:
        self.writer = writer
        self.weight_type = weight_type
        self.rng = np.random.default_rng(seed)
        self.n_params = 0

    def matrix(self, name: str, rows: int, cols: int, *, keep_f32: bool = False) -> None:
        """A weight matrix in the sink's weight type (``keep_f32`` for ops that need f32, e.g. ssm_conv)."""
        data = (self.rng.standard_normal((rows, cols)) * WEIGHT_SCALE).astype(np.float32)
        self.n_params += data.size
        kind = "f32" if keep_f32 else self.weight_type
        if kind in QUANT_TYPES:
            qtype = QUANT_TYPES[kind]
            self.writer.add_tensor(name, gguf.quants.quantize(data, qtype), raw_dtype=qtype)
        else:
            self.writer.add_tensor(name, data.astype(np.float16 if kind == "f16" else np.float32))

    def vector(self, name: str, size: int, value: float | None = 1.0) -> None:
        """An f32 vector: constant ``value`` (norm weights) or small random values when None."""
        if value is None:
            data = (self.rng.standard_normal(size) * WEIGHT_SCALE).astype(np.float32)
        else:
            data = np.full(size, value, dtype=np.float32)
        self.n_params += data.size
        self.writer.add_tensor(name, data)

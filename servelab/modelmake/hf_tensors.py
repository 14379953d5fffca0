"""Seeded random float32 arrays for a Hugging Face checkpoint, collected by name (numpy shapes: out, in)."""

from __future__ import annotations

import numpy as np

from servelab.modelmake.tensors import WEIGHT_SCALE


class ArraySink:
    """Weights drawn in the order they are asked for, so the same seed gives the same bytes."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.tensors: dict[str, np.ndarray] = {}

    def random(self, name: str, *shape: int) -> None:
        """Small normal values (std WEIGHT_SCALE): projections, embeddings, convolutions."""
        self.tensors[name] = (self.rng.standard_normal(shape) * WEIGHT_SCALE).astype(np.float32)

    def matrix(self, name: str, rows: int, cols: int) -> None:
        self.random(name, rows, cols)

    def fill(self, name: str, size: int, value: float) -> None:
        """A constant vector: norm weights (1, or 0 where the norm adds 1), dt_bias, D."""
        self.tensors[name] = np.full(size, value, dtype=np.float32)

    def put(self, name: str, values: np.ndarray) -> None:
        self.tensors[name] = values.astype(np.float32)

    @property
    def n_params(self) -> int:
        return sum(int(t.size) for t in self.tensors.values())


def a_log(heads: int) -> np.ndarray:
    """log(1..heads): decay rates A = -exp(A_log) from -1 to -heads (transformers' Mamba2 init)."""
    return np.log(np.arange(1, heads + 1, dtype=np.float32))

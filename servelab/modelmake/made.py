"""What a model maker wrote: the path, its kind and architecture, parameter count and size on disk."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from servelab.modelmake.shapes import ModelShape


@dataclass(frozen=True, kw_only=True)
class MadeModel:
    path: Path  # the .gguf file, or the Hugging Face model directory
    kind: str
    architecture: str  # GGUF general.architecture, or the Hugging Face class (LlamaForCausalLM)
    weight_type: str
    n_params: int
    file_bytes: int  # the file's size, or the sum of the directory's files
    shape: ModelShape

"""Models the project makes itself: small random-weight GGUF files and Hugging Face directories with a
real byte-level BPE vocabulary."""

from servelab.modelmake.made import MadeModel
from servelab.modelmake.make import make_model
from servelab.modelmake.shapes import HF_KINDS, HF_WEIGHT_TYPES, KINDS, WEIGHT_TYPES, ModelShape, shape_for

__all__ = [
    "HF_KINDS",
    "HF_WEIGHT_TYPES",
    "KINDS",
    "WEIGHT_TYPES",
    "MadeModel",
    "ModelShape",
    "make_model",
    "shape_for",
]

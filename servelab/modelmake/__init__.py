"""Models the project makes itself: small random-weight GGUF files with a real BPE vocabulary."""

from servelab.modelmake.make import MadeModel, make_model
from servelab.modelmake.shapes import KINDS, WEIGHT_TYPES, ModelShape, shape_for

__all__ = ["KINDS", "WEIGHT_TYPES", "MadeModel", "ModelShape", "make_model", "shape_for"]

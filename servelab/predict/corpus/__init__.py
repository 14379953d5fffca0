"""The public measurement corpus: published GPU measurements, each row sourced, shipped as data files."""

from servelab.predict.corpus.load import gpu_class, gpu_classes, load_corpus, load_file
from servelab.predict.corpus.schema import FIGURES, Measurement, Source, Workload

__all__ = [
    "FIGURES",
    "Measurement",
    "Source",
    "Workload",
    "gpu_class",
    "gpu_classes",
    "load_corpus",
    "load_file",
]

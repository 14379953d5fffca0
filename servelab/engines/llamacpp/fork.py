"""The llama.cpp fork that loads the weight formats mainline rejects ("invalid ggml type 142").

PrismML's fork (https://github.com/PrismML-Eng/llama.cpp): its README says branch `prism-v7` reads PQ2_0 (ggml
type 142) and is the one to build (`prism-v6` is stale; `prism` = v5 reads the legacy files), and that its
`ggml-*` libraries must not be mixed with a stock build, hence a static build. Its CUDA kernels include
PTQ1_0 (`ggml/src/ggml-cuda/mmvq-ptq1_0.cuh`). The cmake flags follow mainline's `.devops/cuda.Dockerfile`.
docs/reference/llamacpp-fork.md.
"""

from __future__ import annotations

from servelab.engines.base import SourceBuild
from servelab.model.gguf_types import FORK_TYPES

PRISMML = SourceBuild(
    label="PrismML's llama.cpp fork",
    repo="https://github.com/PrismML-Eng/llama.cpp",
    ref="prism-v7",
    formats=tuple(t.name for t in FORK_TYPES),
    cmake_flags=(
        "-DGGML_CUDA=ON",
        "-DGGML_NATIVE=OFF",
        "-DBUILD_SHARED_LIBS=OFF",
        "-DLLAMA_CURL=OFF",
        "-DLLAMA_BUILD_TESTS=OFF",
        "-DCMAKE_BUILD_TYPE=Release",
        "-DCMAKE_EXE_LINKER_FLAGS=-Wl,--allow-shlib-undefined",
    ),
    target="llama-server",
    image="servelab/llama-server-prismml",
)


def source_build(quant: str) -> SourceBuild | None:
    """The fork a weight format needs (PQ2_0, PTQ1_0 …); None when mainline's image loads it."""
    return PRISMML if quant.upper() in PRISMML.formats else None

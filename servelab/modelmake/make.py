"""make_model(): write a self-made GGUF model of a given kind; the file appears whole or not at all."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from types import ModuleType

import gguf

from servelab.errors import ConfigError
from servelab.modelmake import llama, qwen35
from servelab.modelmake.header import write_general, write_tokenizer
from servelab.modelmake.hf_make import make_hf_model
from servelab.modelmake.made import MadeModel
from servelab.modelmake.shapes import ModelShape, shape_for
from servelab.modelmake.tensors import TensorSink
from servelab.modelmake.tokenizer import train_vocabulary


def make_model(kind: str, path: Path | str, shape: ModelShape | None = None, fmt: str = "gguf") -> MadeModel:
    """Write a ``kind`` model to ``path``: a GGUF file (dense, hybrid, quantized, draft) or, with
    ``fmt="hf"``, a Hugging Face directory (llama, qwen3-next, granite-hybrid); ``shape`` defaults per kind."""
    shape = shape or shape_for(kind, fmt)
    if fmt == "hf":
        return make_hf_model(kind, path, shape)
    arch = qwen35 if kind == "hybrid" else llama
    path = Path(path)
    if not path.name or path.is_dir():
        raise ConfigError(f"-o {str(path)!r} is not a file name; give e.g. -o model.gguf")
    partial = path.with_name(path.name + ".partial")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        n_params = _write(partial, kind, arch, shape)
        os.replace(partial, path)
    except OSError as exc:
        with contextlib.suppress(OSError):  # a parent that is a regular file: nothing was written
            partial.unlink(missing_ok=True)
        raise ConfigError(
            f"cannot write model to {path}: {exc.strerror or exc}; choose a writable -o path"
        ) from exc
    return MadeModel(
        path=path,
        kind=kind,
        architecture=arch.ARCH,
        weight_type=shape.weight_type,
        n_params=n_params,
        file_bytes=path.stat().st_size,
        shape=shape,
    )


def _write(path: Path, kind: str, arch: ModuleType, shape: ModelShape) -> int:
    """Header, tokenizer and tensors of ``arch`` (a module with ARCH, write_hparams, write_tensors)."""
    writer = gguf.GGUFWriter(path, arch.ARCH)
    write_general(writer, f"servelab-{kind}", shape)
    arch.write_hparams(writer, shape)
    write_tokenizer(writer, train_vocabulary(shape.vocab))
    sink = TensorSink(writer, shape.weight_type, shape.seed)
    arch.write_tensors(sink, shape)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return sink.n_params

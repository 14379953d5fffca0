"""make_hf_model(): write a self-made Hugging Face model directory; it appears whole or not at all.

The directory holds what transformers' and vLLM's loaders read (docs/reference/vllm-cpu.md §2):
config.json, generation_config.json, model.safetensors (BF16), tokenizer.json, tokenizer_config.json
and special_tokens_map.json. It is written as DIR.partial, then renamed to DIR.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from types import ModuleType
from typing import Any

from servelab.errors import ConfigError
from servelab.modelmake import hf_granite, hf_llama, hf_qwen3next
from servelab.modelmake.hf_tensors import ArraySink
from servelab.modelmake.hf_tokenizer import special_ids, special_tokens_map, tokenizer_config, tokenizer_json
from servelab.modelmake.made import MadeModel
from servelab.modelmake.safetensors_file import write_safetensors
from servelab.modelmake.shapes import ModelShape, shape_for
from servelab.modelmake.tokenizer import train_vocabulary

ARCHITECTURES: dict[str, ModuleType] = {
    "llama": hf_llama,
    "qwen3-next": hf_qwen3next,
    "granite-hybrid": hf_granite,
}


def make_hf_model(kind: str, path: Path | str, shape: ModelShape | None = None) -> MadeModel:
    """Write a ``kind`` model (llama, qwen3-next, granite-hybrid) as the directory ``path``."""
    shape = shape or shape_for(kind, "hf")
    arch = ARCHITECTURES[kind]
    path = Path(path)
    _check_target(path)
    partial = path.with_name(path.name + ".partial")
    try:
        shutil.rmtree(partial, ignore_errors=True)  # left by a writer that was killed
        partial.mkdir(parents=True)
        n_params = _write(partial, arch, shape)
        os.replace(partial, path)
    except OSError as exc:
        shutil.rmtree(partial, ignore_errors=True)
        raise ConfigError(
            f"cannot write model to {path}: {exc.strerror or exc}; choose a writable -o directory"
        ) from exc
    size = sum(f.stat().st_size for f in path.iterdir())
    return MadeModel(
        path=path,
        kind=kind,
        architecture=arch.ARCHITECTURE,
        weight_type=shape.weight_type,
        n_params=n_params,
        file_bytes=size,
        shape=shape,
    )


def _check_target(path: Path) -> None:
    if not path.name or path.name in (".", ".."):
        raise ConfigError(f"-o {str(path)!r} is not a directory name; give e.g. -o tiny-llama")
    if path.exists() and not path.is_dir():
        raise ConfigError(f"-o {path} is a file; --format hf writes a directory: give a new directory name")
    if path.is_dir() and any(path.iterdir()):
        raise ConfigError(
            f"-o {path} already exists and is not empty; remove it or give a new directory name"
        )


def _write(directory: Path, arch: ModuleType, shape: ModelShape) -> int:
    vocab = train_vocabulary(shape.vocab)
    ids = special_ids(vocab)
    sink = ArraySink(shape.seed)
    arch.write_tensors(sink, shape)
    n_params = write_safetensors(directory / "model.safetensors", sink.tensors, {"format": "pt"})
    _json(directory / "config.json", {**arch.config(shape), **ids})
    _json(directory / "generation_config.json", {**ids, "do_sample": False})
    _json(directory / "tokenizer.json", tokenizer_json(vocab))
    _json(directory / "tokenizer_config.json", tokenizer_config(vocab, shape.ctx_train))
    _json(directory / "special_tokens_map.json", special_tokens_map())
    return n_params


def _json(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")

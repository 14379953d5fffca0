"""`load_model`: one entry point from a model reference (catalog id, .gguf, config.json, directory) to ModelSpec."""

from __future__ import annotations

from pathlib import Path

from servelab.errors import ConfigError, ModelFormatError
from servelab.model.catalog import catalog_ids, catalog_model, find_catalog_id
from servelab.model.spec import ModelSpec


def load_model(
    ref: str, *, quant: str | None = None, hf: bool = False, hf_endpoint: str | None = None
) -> ModelSpec:
    """Describe the model `ref` names; `quant` re-prices catalog/config weights; `hf` fetches config + headers."""
    spec = _read(ref, hf=hf, hf_endpoint=hf_endpoint)
    if quant is None:
        return spec
    from servelab.model.quant import get_quant, synthesise_weights

    fmt = get_quant(quant)
    if spec.weights_exact:
        if fmt.name.lower() == spec.quant.lower():
            return spec
        raise ConfigError(
            f"{spec.name} is stored as {spec.quant} (read from a file); --quant {quant} applies to "
            "catalog ids and config.json files only; drop --quant or give the catalog id"
        )
    return synthesise_weights(spec, fmt)


def _read(ref: str, *, hf: bool, hf_endpoint: str | None) -> ModelSpec:
    if hf:
        from servelab.model.hub import fetch_model

        return fetch_model(find_catalog_id(ref) or ref, endpoint=hf_endpoint)  # "qwen3-8b" → Qwen/Qwen3-8B
    path = Path(ref).expanduser()
    try:
        exists, is_file, is_dir = path.exists(), path.is_file(), path.is_dir()
        has_config = is_dir and (path / "config.json").is_file()
    except OSError as exc:  # a name longer than the file system allows, a parent that cannot be searched
        shown = ref if len(ref) <= 80 else f"{ref[:80]}… ({len(ref):,} characters)"
        raise ConfigError(f"model {shown!r}: cannot look the path up ({exc.strerror or exc})") from None
    if exists and not (is_file or is_dir):
        raise ModelFormatError(f"{ref} is not a regular file (a FIFO, device or socket); give a model file")
    if path.suffix.lower() == ".gguf" and is_file:
        from servelab.model.gguf_file import read_gguf

        return read_gguf(path)
    if is_file or has_config:
        from servelab.model.safetensors_header import read_model_dir

        return read_model_dir(path)
    model_id = find_catalog_id(ref)
    if model_id is not None:
        return catalog_model(model_id)
    if (
        path.suffix.lower() in (".gguf", ".json", ".safetensors")
        or ref.startswith((".", "~"))
        or path.is_absolute()
    ):
        raise ConfigError(
            f"model file {ref!r} does not exist (or is not a .gguf, config.json or model directory)"
        )
    raise ConfigError(
        f"unknown model {ref!r}: give a catalog id ({', '.join(catalog_ids())}), a .gguf file, "
        "a config.json or a model directory (or --hf with network access)"
    )

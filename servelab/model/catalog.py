"""The bundled offline catalog: one config.json per popular model in `catalog/*.json`, built by hf_config.

Each file is `{"id": "Org/Name", "source": "<where the numbers come from>", "config": {<config.json fields>}}`,
so catalog models go through the same parser as downloaded configs.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from servelab.errors import ModelFormatError
from servelab.model.hf_config import spec_from_config
from servelab.model.spec import ModelSpec


def catalog_entries() -> dict[str, dict[str, Any]]:
    """Every catalog entry by its Hugging Face id."""
    entries: dict[str, dict[str, Any]] = {}
    for item in sorted(resources.files("servelab.model").joinpath("catalog").iterdir(), key=lambda p: p.name):
        if not item.name.endswith(".json"):
            continue
        try:
            entry = json.loads(item.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ModelFormatError(f"catalog file {item.name} is not valid JSON: {exc}") from exc
        entries[entry["id"]] = entry
    return entries


def catalog_ids() -> list[str]:
    return list(catalog_entries())


def find_catalog_id(ref: str) -> str | None:
    """The catalog id `ref` names: exact, case-insensitive, or without the organisation."""
    wanted = ref.strip().lower()
    for model_id in catalog_entries():
        if wanted in (model_id.lower(), model_id.split("/", 1)[-1].lower()):
            return model_id
    return None


def catalog_model(model_id: str) -> ModelSpec:
    """The ModelSpec of a catalog id (as returned by `find_catalog_id`), weights in its native format."""
    entry = catalog_entries()[model_id]
    spec = spec_from_config(entry["config"], name=model_id, source="catalog")
    spec.extra["source_note"] = entry["source"]
    return spec

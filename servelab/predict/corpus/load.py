"""Read the corpus files shipped in `data/` into `Measurement`s, refusing any row that is not whole.

Nothing is fetched: the data ships with the code. A file or row that breaks the schema is a
ModelFormatError naming the file, the row and the field, so a bad contribution fails the corpus test.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from importlib import resources
from pathlib import Path
from typing import Any

from servelab.errors import ModelFormatError
from servelab.hardware.gpus import GPU, gpu_names, load_gpus
from servelab.predict.corpus.schema import (
    BACKENDS,
    CLIENTS,
    ENGINES,
    FIGURES,
    MODEL_KINDS,
    Measurement,
    Source,
    Workload,
)

_DATE = re.compile(r"^\d{4}-\d{2}(-\d{2})?$")
_FLAG_TYPES = (str, int, float, bool, type(None))


def corpus_dir() -> Path:
    return Path(str(resources.files("servelab.predict.corpus") / "data"))


def load_corpus(paths: Iterable[Path] | None = None) -> tuple[Measurement, ...]:
    """Every measurement of every corpus file (the shipped ones unless `paths` are given), file by file."""
    files = sorted(corpus_dir().glob("*.json")) if paths is None else list(paths)
    catalog = frozenset(gpu_names())
    return tuple(row for path in files for row in load_file(path, catalog))


def load_file(path: Path, catalog: frozenset[str] | None = None) -> tuple[Measurement, ...]:
    """One corpus file's rows; `catalog` is the GPU catalog's names (read once by `load_corpus`)."""
    known = catalog if catalog is not None else frozenset(gpu_names())
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelFormatError(f"corpus file {path.name}: cannot read it as JSON ({exc})") from exc
    where = f"corpus file {path.name}"
    source = _source(_obj(doc, "source", where), path.stem, where)
    rows = doc.get("rows")
    if not isinstance(rows, list) or not rows:
        raise ModelFormatError(f"{where}: 'rows' must be a non-empty list")
    return tuple(_row(source, i, row, known, f"{where} row {i}") for i, row in enumerate(rows))


def _source(doc: dict[str, Any], stem: str, where: str) -> Source:
    url = _text(doc, "url", where)
    if not url.startswith("https://"):
        raise ModelFormatError(f"{where}: source url must be an https:// address, not {url!r}")
    published = _text(doc, "published", where)
    if not _DATE.match(published):
        raise ModelFormatError(f"{where}: source published must be YYYY-MM-DD or YYYY-MM, not {published!r}")
    return Source(
        id=stem,
        url=url,
        title=_text(doc, "title", where),
        published=published,
        client=_choice(doc, "client", CLIENTS, where),
        notes=str(doc.get("notes", "")),
    )


def _row(source: Source, index: int, row: Any, catalog: frozenset[str], where: str) -> Measurement:
    if not isinstance(row, dict):
        raise ModelFormatError(f"{where}: a row must be an object")
    gpu = row.get("gpu")
    if gpu is not None and gpu not in catalog:
        raise ModelFormatError(f"{where}: gpu {gpu!r} is not a catalog name (use null and gpu_label)")
    figures = _figures(_obj(row, "figures", where), where)
    verbatim = row.get("verbatim")
    if not isinstance(verbatim, list) or not verbatim or not all(isinstance(v, str) and v for v in verbatim):
        raise ModelFormatError(f"{where}: 'verbatim' must list the published lines the figures come from")
    flags = row.get("flags", {})
    if not isinstance(flags, dict) or not all(isinstance(v, _FLAG_TYPES) for v in flags.values()):
        raise ModelFormatError(f"{where}: 'flags' must map flag names to plain values")
    return Measurement(
        source=source,
        index=index,
        engine=_choice(row, "engine", ENGINES, where),
        engine_release=_text(row, "engine_release", where),
        backend=_choice(row, "backend", BACKENDS, where),
        model=_text(row, "model", where),
        model_kind=_choice(row, "model_kind", MODEL_KINDS, where),
        params_b=_positive(row, "params_b", where),
        active_params_b=_positive(row, "active_params_b", where),
        weight_format=_text(row, "weight_format", where),
        kv_dtype=_text(row, "kv_dtype", where),
        gpu=gpu,
        gpu_label=_text(row, "gpu_label", where),
        gpu_count=_count(row, "gpu_count", where),
        tp=_count(row, "tp", where, default=1),
        ep=_count(row, "ep", where, default=1),
        pp=_count(row, "pp", where, default=1),
        flags=dict(flags),
        launch=str(row.get("launch", "")),
        workload=_workload(_obj(row, "workload", where), where),
        figures=figures,
        verbatim=tuple(verbatim),
        excluded=str(row.get("excluded", "")),
    )


def _workload(doc: dict[str, Any], where: str) -> Workload:
    rate = doc.get("request_rate")
    if rate is not None and not (isinstance(rate, int | float) and rate > 0):
        raise ModelFormatError(f"{where}: workload request_rate must be a positive number or null")
    return Workload(
        prompt_tokens=_count(doc, "prompt_tokens", where, minimum=0),
        output_tokens=_count(doc, "output_tokens", where, minimum=0),
        concurrency=_optional_count(doc, "concurrency", where),
        request_rate=None if rate is None else float(rate),
        num_prompts=_optional_count(doc, "num_prompts", where),
        depth=_count(doc, "depth", where, default=0, minimum=0),
        dataset=str(doc.get("dataset", "")),
        batch=_optional_count(doc, "batch", where),
    )


def _figures(doc: dict[str, Any], where: str) -> dict[str, float]:
    unknown = sorted(set(doc) - set(FIGURES))
    if unknown:
        raise ModelFormatError(f"{where}: unknown figure {unknown[0]!r} (known: {', '.join(FIGURES)})")
    figures = {k: v for k, v in doc.items() if v is not None}
    if not figures:
        raise ModelFormatError(f"{where}: a row needs at least one figure")
    for name, value in figures.items():
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise ModelFormatError(f"{where}: figure {name} must be a positive number, not {value!r}")
    return {k: float(v) for k, v in figures.items()}


def _obj(doc: Any, key: str, where: str) -> dict[str, Any]:
    value = doc.get(key) if isinstance(doc, dict) else None
    if not isinstance(value, dict):
        raise ModelFormatError(f"{where}: '{key}' must be an object")
    return value


def _text(doc: dict[str, Any], key: str, where: str) -> str:
    value = doc.get(key)
    if not isinstance(value, str) or not value.strip():
        raise ModelFormatError(f"{where}: '{key}' must be a non-empty string")
    return value


def _choice(doc: dict[str, Any], key: str, choices: tuple[str, ...], where: str) -> str:
    value = _text(doc, key, where)
    if value not in choices:
        raise ModelFormatError(f"{where}: '{key}' is {value!r}; one of {', '.join(choices)}")
    return value


def _positive(doc: dict[str, Any], key: str, where: str) -> float:
    value = doc.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ModelFormatError(f"{where}: '{key}' must be a positive number")
    return float(value)


def _count(doc: dict[str, Any], key: str, where: str, default: int | None = None, minimum: int = 1) -> int:
    value = doc.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ModelFormatError(f"{where}: '{key}' must be a whole number >= {minimum}")
    return value


def _optional_count(doc: dict[str, Any], key: str, where: str) -> int | None:
    return None if doc.get(key) is None else _count(doc, key, where)


def gpu_class(gpu: GPU) -> str:
    """The class the cross-validation reports apart: Apple unified memory, AMD, HBM, or GDDR (the rest)."""
    if gpu.unified_memory and gpu.name.startswith("m"):
        return "apple"
    if gpu.name.startswith("mi"):
        return "amd"
    return "hbm" if "HBM" in gpu.memory_stated.upper() else "gddr"


def gpu_classes() -> dict[str, str]:
    """Catalog name -> class, for every catalog GPU."""
    return {gpu.name: gpu_class(gpu) for gpu in load_gpus() if not gpu.is_cpu}

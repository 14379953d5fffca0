"""The models already on this machine: the Hugging Face cache, Ollama's store, llama.cpp's and LM Studio's model
folders, each read as `servelab plan` reads a model file (GGUF header, config.json + safetensors headers).

Bounded: each store is walked to MAX_DEPTH folders below its root, at most MAX_ENTRIES directory entries in all
and MAX_MODELS models; directories are never entered through a symbolic link (a link to `/` cannot make it walk
the disk). Files are opened as `model/files.py` opens them (regular files only, headers read within their
bounds); the Hugging Face cache's snapshot files are links into its `blobs/`, which is how it stores them, so a
file may be a link to a regular file. A file that cannot be read is a model with an error, not a failure.

Where each store lives (their own documentation, as of 2026):
- Hugging Face: `$HF_HUB_CACHE`, else `$HF_HOME/hub`, else `~/.cache/huggingface/hub`;
  `models--ORG--NAME/snapshots/REVISION/config.json` (huggingface_hub's cache layout)
- Ollama: `$OLLAMA_MODELS`, else `~/.ollama/models`; `manifests/HOST/NAMESPACE/MODEL/TAG` (JSON: the layer
  of media type `application/vnd.ollama.image.model` is the GGUF) and `blobs/sha256-HEX`
- llama.cpp (`-hf` downloads): `$LLAMA_CACHE`, else `~/.cache/llama.cpp`; `*.gguf`
- LM Studio: `~/.lmstudio/models` and `~/.cache/lm-studio/models`; `PUBLISHER/REPO/*.gguf`
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from servelab.errors import ServelabError
from servelab.model.spec import ModelSpec

MAX_DEPTH = 6
MAX_ENTRIES = 20_000
MAX_MODELS = 200
MAX_MANIFEST_BYTES = 256 * 1024
OLLAMA_MODEL_LAYER = "application/vnd.ollama.image.model"
_SPLIT = re.compile(r"-(\d{5})-of-(\d{5})\.gguf$", re.IGNORECASE)  # llama.cpp's split files: read the first
_DIGEST = re.compile(r"^sha256:([0-9a-f]{64})$")


@dataclass(frozen=True)
class LocalModel:
    """One model found on disk: where (`store`, `path`), its name there, and its description or why not."""

    store: str  # huggingface, ollama, llama.cpp, lm-studio
    name: str
    path: Path
    spec: ModelSpec | None
    error: str | None = None


@dataclass(frozen=True)
class Stores:
    """The folders to look in (tests give their own)."""

    huggingface: tuple[Path, ...] = ()
    ollama: tuple[Path, ...] = ()
    llamacpp: tuple[Path, ...] = ()
    lmstudio: tuple[Path, ...] = ()


def default_stores(env: Mapping[str, str] | None = None, home: Path | None = None) -> Stores:
    """Where the stores live for this user (the environment variables above, else their defaults)."""
    env = os.environ if env is None else env
    home = Path(env.get("HOME", "~")).expanduser() if home is None else home
    hf_home = Path(env["HF_HOME"]) if env.get("HF_HOME") else home / ".cache" / "huggingface"
    hub = Path(env["HF_HUB_CACHE"]) if env.get("HF_HUB_CACHE") else hf_home / "hub"
    ollama = Path(env["OLLAMA_MODELS"]) if env.get("OLLAMA_MODELS") else home / ".ollama" / "models"
    llama = Path(env["LLAMA_CACHE"]) if env.get("LLAMA_CACHE") else home / ".cache" / "llama.cpp"
    return Stores(
        (hub,), (ollama,), (llama,), (home / ".lmstudio" / "models", home / ".cache" / "lm-studio" / "models")
    )


def find_local_models(stores: Stores | None = None) -> list[LocalModel]:
    """Every model the stores hold (at most MAX_MODELS), each read or with the reason it could not be."""
    stores = default_stores() if stores is None else stores
    budget = _Budget()
    found: list[LocalModel] = []
    for root in stores.huggingface:
        found += [_read(m, "huggingface", p, _hf_dir) for m, p in _hf_snapshots(root, budget)]
    for root in stores.ollama:
        found += [_read(m, "ollama", p, _gguf) for m, p in _ollama_blobs(root, budget)]
    for store, roots in (("llama.cpp", stores.llamacpp), ("lm-studio", stores.lmstudio)):
        for root in roots:
            found += [
                _read(p.relative_to(root).as_posix(), store, p, _gguf) for p in _gguf_files(root, budget)
            ]
    return found[:MAX_MODELS]


class _Budget:
    """Directory entries left to look at, across every store."""

    def __init__(self) -> None:
        self.left = MAX_ENTRIES

    def entries(self, folder: Path) -> list[os.DirEntry[str]]:
        """`folder`'s entries (sorted by name), within the budget; none when it cannot be listed."""
        if self.left <= 0:
            return []
        try:
            with os.scandir(folder) as listing:
                out = []
                for entry in listing:
                    self.left -= 1
                    if self.left < 0:
                        break
                    out.append(entry)
        except OSError:
            return []
        return sorted(out, key=lambda e: e.name)


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False


def _is_file(entry: os.DirEntry[str]) -> bool:
    """A regular file, or a link to one (the Hugging Face cache's snapshot files)."""
    try:
        return entry.is_file(follow_symlinks=True)
    except OSError:
        return False


def _gguf_files(root: Path, budget: _Budget, depth: int = 0) -> Iterator[Path]:
    for entry in budget.entries(root):
        if _is_dir(entry) and depth < MAX_DEPTH:
            yield from _gguf_files(Path(entry.path), budget, depth + 1)
        elif entry.name.lower().endswith(".gguf") and _is_file(entry):
            split = _SPLIT.search(entry.name)
            if split is None or int(split.group(1)) == 1:
                yield Path(entry.path)


def _hf_snapshots(root: Path, budget: _Budget) -> Iterator[tuple[str, Path]]:
    """(ORG/NAME, the newest snapshot folder holding a config.json) per cached model repository."""
    for repo in budget.entries(root):
        if not (repo.name.startswith("models--") and _is_dir(repo)):
            continue
        name = repo.name.removeprefix("models--").replace("--", "/")
        snapshots = [
            Path(s.path)
            for s in budget.entries(Path(repo.path) / "snapshots")
            if _is_dir(s)
            and any(f.name == "config.json" and _is_file(f) for f in budget.entries(Path(s.path)))
        ]
        if snapshots:
            yield name, max(snapshots, key=_mtime)


def _mtime(path: Path) -> float:
    try:
        return path.stat(follow_symlinks=False).st_mtime
    except OSError:
        return 0.0


def _ollama_blobs(root: Path, budget: _Budget) -> Iterator[tuple[str, Path]]:
    """(MODEL:TAG, its GGUF blob) per manifest under `manifests/`."""
    manifests = root / "manifests"
    for path in _files_below(manifests, budget, 0):
        digest = _model_digest(path)
        parts = path.relative_to(manifests).parts
        name = f"{'/'.join(parts[1:-1]) if parts[1:2] != ('library',) else parts[-2]}:{parts[-1]}"
        if digest is not None:
            yield name, root / "blobs" / f"sha256-{digest}"


def _files_below(folder: Path, budget: _Budget, depth: int) -> Iterator[Path]:
    for entry in budget.entries(folder):
        if _is_dir(entry) and depth < MAX_DEPTH:
            yield from _files_below(Path(entry.path), budget, depth + 1)
        elif entry.is_file(follow_symlinks=False):
            yield Path(entry.path)


def _model_digest(path: Path) -> str | None:
    """The hex digest of a manifest's model layer; None for anything else (a bad or foreign file)."""
    from servelab.model.files import read_regular

    try:
        manifest = json.loads(read_regular(path, MAX_MANIFEST_BYTES, "Ollama manifest"))
    except (ServelabError, ValueError):
        return None
    layers = manifest.get("layers") if isinstance(manifest, dict) else None
    for layer in layers if isinstance(layers, list) else []:
        if isinstance(layer, dict) and layer.get("mediaType") == OLLAMA_MODEL_LAYER:
            match = _DIGEST.match(str(layer.get("digest", "")))
            return match.group(1) if match else None
    return None


def _gguf(path: Path) -> ModelSpec:
    from servelab.model.gguf_file import read_gguf

    return read_gguf(path)


def _hf_dir(path: Path) -> ModelSpec:
    from servelab.model.safetensors_header import read_model_dir

    return read_model_dir(path)


def _read(name: str, store: str, path: Path, reader: object) -> LocalModel:
    try:
        spec = reader(path)  # type: ignore[operator]
    except (ServelabError, OSError, ValueError) as exc:
        return LocalModel(
            store, name, path, None, str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        )
    return LocalModel(store, name, path, spec)

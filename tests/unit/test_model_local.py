"""The models on disk (model/local.py), found in real store layouts made in a temporary home: a Hugging Face cache
snapshot (a real config.json and safetensors, linked from blobs/ as the cache stores them), an Ollama manifest and
its GGUF blob, llama.cpp's cache and LM Studio's folders; and the bounds: no walking through a link to a folder,
split GGUFs read once, a bad file a model with an error, foreign files ignored."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from servelab.model import local
from servelab.model.local import Stores, default_stores, find_local_models
from servelab.modelmake.make import make_model


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("made")
    return {
        "dense": make_model("dense", folder / "dense.gguf").path,
        "quantized": make_model("quantized", folder / "quantized.gguf").path,
        "hf": make_model("llama", folder / "hf", fmt="hf").path,
    }


def _hf_cache(hub: Path, made: Path, repo: str = "me/tiny-llama") -> Path:
    """huggingface_hub's layout: the files in blobs/ by hash, the snapshot's names linked to them."""
    folder = hub / f"models--{repo.replace('/', '--')}"
    snapshot = folder / "snapshots" / "0123abcd"
    snapshot.mkdir(parents=True)
    (folder / "blobs").mkdir()
    for file in made.iterdir():
        blob = folder / "blobs" / hashlib.sha256(file.read_bytes()).hexdigest()
        blob.write_bytes(file.read_bytes())
        (snapshot / file.name).symlink_to(os.path.relpath(blob, snapshot))
    return snapshot


def _ollama(root: Path, gguf: Path, name: str = "tiny", tag: str = "q8") -> Path:
    data = gguf.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    (root / "blobs").mkdir(parents=True, exist_ok=True)
    blob = root / "blobs" / f"sha256-{digest}"
    blob.write_bytes(data)
    manifest = root / "manifests" / "registry.ollama.ai" / "library" / name / tag
    manifest.parent.mkdir(parents=True, exist_ok=True)
    layers = [
        {"mediaType": "application/vnd.ollama.image.template", "digest": "sha256:" + "0" * 64},
        {"mediaType": "application/vnd.ollama.image.model", "digest": f"sha256:{digest}", "size": len(data)},
    ]
    manifest.write_text(json.dumps({"schemaVersion": 2, "layers": layers}))
    return blob


def test_every_store_is_found_and_read(tmp_path: Path, made: dict[str, Path]) -> None:
    home = tmp_path / "home"
    snapshot = _hf_cache(home / ".cache" / "huggingface" / "hub", made["hf"])
    blob = _ollama(home / ".ollama" / "models", made["quantized"])
    llama = home / ".cache" / "llama.cpp" / "org_repo_dense.gguf"
    llama.parent.mkdir(parents=True)
    llama.write_bytes(made["dense"].read_bytes())
    studio = home / ".lmstudio" / "models" / "pub" / "repo" / "model-Q8_0.gguf"
    studio.parent.mkdir(parents=True)
    studio.write_bytes(made["quantized"].read_bytes())
    found = {(m.store, m.name): m for m in find_local_models(default_stores(env={}, home=home))}
    assert sorted(found) == [
        ("huggingface", "me/tiny-llama"),
        ("llama.cpp", "org_repo_dense.gguf"),
        ("lm-studio", "pub/repo/model-Q8_0.gguf"),
        ("ollama", "tiny:q8"),
    ]
    hf = found["huggingface", "me/tiny-llama"]
    assert hf.path == snapshot and hf.spec is not None and hf.spec.weights_exact  # the safetensors read
    assert hf.spec.architecture == "llama" and hf.spec.num_layers == 4
    ollama = found["ollama", "tiny:q8"]
    assert ollama.path == blob and ollama.spec is not None and ollama.spec.quant == "Q8_0"
    assert found["llama.cpp", "org_repo_dense.gguf"].spec.quant == "F32"  # type: ignore[union-attr]


def test_the_environment_moves_the_stores(tmp_path: Path) -> None:
    env = {
        "HF_HOME": str(tmp_path / "hf"),
        "OLLAMA_MODELS": str(tmp_path / "ol"),
        "LLAMA_CACHE": str(tmp_path / "lc"),
    }
    stores = default_stores(env=env, home=tmp_path / "home")
    assert stores.huggingface == (tmp_path / "hf" / "hub",)
    assert (stores.ollama, stores.llamacpp) == ((tmp_path / "ol",), (tmp_path / "lc",))
    assert default_stores(env={**env, "HF_HUB_CACHE": str(tmp_path / "c")}, home=tmp_path).huggingface == (
        tmp_path / "c",
    )


def test_links_to_folders_are_not_walked_and_split_files_are_read_once(
    tmp_path: Path, made: dict[str, Path]
) -> None:
    root = tmp_path / "models"
    (root / "a").mkdir(parents=True)
    (root / "a" / "loop").symlink_to(root)  # a walk through links would never end
    (root / "a" / "root").symlink_to("/")
    for part in (1, 2):
        (root / "a" / f"big-0000{part}-of-00002.gguf").write_bytes(made["dense"].read_bytes())
    found = find_local_models(Stores(llamacpp=(root,)))
    assert [m.name for m in found] == ["a/big-00001-of-00002.gguf"]


def test_a_bad_file_is_a_model_with_its_error_and_foreign_files_are_ignored(tmp_path: Path) -> None:
    root = tmp_path / "lc"
    root.mkdir()
    (root / "broken.gguf").write_bytes(b"GGUF\x03\x00\x00\x00truncated")
    (root / "notes.txt").write_text("not a model")
    (root / "fifo.gguf").unlink(missing_ok=True)
    os.mkfifo(root / "fifo.gguf")  # never opened: not a regular file
    ollama = tmp_path / "ol" / "manifests" / "registry.ollama.ai" / "library" / "x" / "latest"
    ollama.parent.mkdir(parents=True)
    ollama.write_text("{not json")
    found = find_local_models(Stores(llamacpp=(root,), ollama=(tmp_path / "ol",)))
    assert [(m.name, m.spec) for m in found] == [("broken.gguf", None)]
    assert found[0].error and "\n" not in found[0].error


def test_the_walk_stops_at_its_entry_budget(
    tmp_path: Path, made: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "lc"
    root.mkdir()
    for k in range(5):
        (root / f"m{k}.gguf").write_bytes(made["dense"].read_bytes())
    monkeypatch.setattr(local, "MAX_ENTRIES", 3)
    assert len(find_local_models(Stores(llamacpp=(root,)))) <= 3

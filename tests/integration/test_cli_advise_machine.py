"""`servelab advise --gpu auto` without a MODEL, end to end on this machine (its GPUs through NVML, else its CPU:
here, a 2-core VM, the CPU): the models made in a temporary home's stores (llama.cpp's cache, Ollama's store, a
Hugging Face cache snapshot), each with its best configuration, single-user and aggregate speed; the JSON; no
models is one line and exit 2."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from servelab.cli.app import main
from servelab.modelmake.make import make_model

ASK = [
    "advise",
    "--gpu",
    "auto",
    "--no-catalog",
    "--users",
    "2",
    "--slo",
    "tpot_p99_ms=500",
    "--engine",
    "llamacpp",
]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, measured_host: None) -> Path:
    home = tmp_path / "home"
    make_model("dense", home / ".cache" / "llama.cpp" / "tiny-dense.gguf")
    make_model(
        "llama",
        home / ".cache" / "huggingface" / "hub" / "models--me--tiny-llama" / "snapshots" / "a1",
        fmt="hf",
    )
    quantized = make_model("quantized", tmp_path / "q.gguf").path.read_bytes()
    digest = hashlib.sha256(quantized).hexdigest()
    store = home / ".ollama" / "models"
    (store / "blobs").mkdir(parents=True)
    (store / "blobs" / f"sha256-{digest}").write_bytes(quantized)
    manifest = store / "manifests" / "registry.ollama.ai" / "library" / "tiny" / "q8"
    manifest.parent.mkdir(parents=True)
    layer = {"mediaType": "application/vnd.ollama.image.model", "digest": f"sha256:{digest}"}
    manifest.write_text(json.dumps({"layers": [layer]}))
    monkeypatch.setenv("HOME", str(home))
    for var in ("HF_HOME", "HF_HUB_CACHE", "OLLAMA_MODELS", "LLAMA_CACHE"):
        monkeypatch.delenv(var, raising=False)
    return home


def test_models_on_this_machine_are_ranked_with_their_speeds(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(ASK) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines[0].startswith("models on ") and lines[0].endswith(
        ", context 1024, SLO tpot_p99_ms<=500: 3 of 3 deliver within it"
    )
    named = [line for line in lines if line[:3] in ("1. ", "2. ", "3. ")]
    assert sorted(n.split(": ")[0][3:] for n in named) == [
        "me/tiny-llama (huggingface)",
        "tiny-dense.gguf (llama.cpp)",
        "tiny:q8 (ollama)",
    ]
    speeds = [line for line in lines if line.startswith("   1 user: TPOT ")]
    assert len(speeds) == 3 and all(" tok/s); aggregate " in s and " at 1 x 2 users" in s for s in speeds)
    launches = [line for line in lines if line.startswith("   $ llama-server -m ")]
    cached = str(home / ".cache" / "llama.cpp" / "tiny-dense.gguf")
    assert any(f" -m {cached} " in line for line in launches)  # a GGUF on disk is launched from its path
    assert "models" in err and "3/3" in err  # the progress bar


def test_models_on_this_machine_as_json(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*ASK, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    rows = data["models"]
    assert [r["source"] for r in rows].count("ollama") == 1 and len(rows) == 3
    speeds = [r["aggregate_tok_s"] for r in rows]
    assert speeds == sorted(speeds, reverse=True) or len({r["best"]["gpus_used"] for r in rows}) > 1
    for r in rows:
        assert r["context"] == 1024 and r["best"]["engine"] == "llamacpp"
        assert r["single_user_tpot_ms"] > 0 and r["single_user_tok_s"] == pytest.approx(
            1000 / r["single_user_tpot_ms"]
        )


def test_no_models_anywhere_is_one_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    for var in ("HF_HOME", "HF_HUB_CACHE", "OLLAMA_MODELS", "LLAMA_CACHE"):
        monkeypatch.delenv(var, raising=False)
    assert main(["advise", "--gpu", "rtx4090", "--no-catalog", "--slo", "ttft_p99_ms=1000"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1 and "no models to weigh" in err

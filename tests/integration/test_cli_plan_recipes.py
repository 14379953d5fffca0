"""Recipes that run as emitted: every path in a `plan --emit compose` file resolves inside the container to the
host file (read back with verify's compose reader), and a format only a fork loads gets a Dockerfile that builds
that fork for the card's CUDA architecture; the official image is never offered for it."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from servelab.cli.app import main
from servelab.engines.llamacpp import IMAGE as LLAMACPP_IMAGE
from servelab.verify.compose import load_service

PTQ = ["plan", "Qwen/Qwen3.5-27B", "--quant", "PTQ1_0", "--engine", "llamacpp", "--context", "65536"]
FILE_FLAGS = ("-m", "--model", "-md", "--model-draft", "--model-path")


def _emit(capsys, argv: list[str], tmp_path: Path, name: str = "docker-compose.yml") -> Path:
    assert main(argv) == 0
    out, _ = capsys.readouterr()
    path = tmp_path / name
    path.write_text(out + "\n")
    return path


def _model_words(argv: tuple[str, ...]) -> list[str]:
    return [argv[i + 1] for i, word in enumerate(argv[:-1]) if word in FILE_FLAGS]


def _docker_compose() -> bool:
    """docker with its compose plugin (this machine has the docker CLI without it)."""
    if shutil.which("docker") is None:
        return False
    probe = subprocess.run(["docker", "compose", "version"], capture_output=True, text=True, check=False)
    return probe.returncode == 0


def _check_compose(path: Path) -> dict[str, Path | None]:
    """Each model word of the service → the host file it resolves to through the volumes (None: unresolved)."""
    service = load_service(path)
    resolved = {word: service.host_path(word, path.parent) for word in _model_words(service.argv)}
    if _docker_compose():  # where docker compose runs, it must accept the file as written
        done = subprocess.run(
            ["docker", "compose", "-f", str(path), "config", "-q"],
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr
    return resolved


def test_a_catalog_llamacpp_recipe_reads_the_model_from_the_mounted_directory(tmp_path: Path, capsys) -> None:
    argv = ["plan", "Qwen/Qwen3-8B", "--engine", "llamacpp", "--quant", "Q4_K_M", "--context", "8192"]
    path = _emit(capsys, [*argv, "--emit", "compose"], tmp_path)
    resolved = _check_compose(path)
    assert resolved == {"/models/Qwen3-8B-Q4_K_M.gguf": tmp_path / "models" / "Qwen3-8B-Q4_K_M.gguf"}
    service = yaml.safe_load(path.read_text())["services"]["llamacpp"]
    assert service["image"] == LLAMACPP_IMAGE  # Q4_K_M loads in the official image


def test_a_local_gguf_and_its_draft_resolve_to_the_files_on_the_host(tmp_path: Path, capsys) -> None:
    from servelab.modelmake import make_model

    made = make_model("dense", tmp_path / "weights dir" / "tiny.gguf")
    path = _emit(
        capsys, ["plan", str(made.path), "--gpu", "l4", "--context", "4096", "--emit", "compose"], tmp_path
    )
    resolved = _check_compose(path)
    assert list(resolved.values()) == [made.path] and made.path.is_file()
    assert all(word.startswith("/models/") for word in resolved)


def test_a_vllm_hub_id_is_left_to_the_hub_cache(tmp_path: Path, capsys) -> None:
    argv = [
        "plan",
        "Qwen/Qwen3-8B",
        "--engine",
        "vllm",
        "--quant",
        "bf16",
        "--context",
        "8192",
        "--emit",
        "compose",
    ]
    service = load_service(_emit(capsys, argv, tmp_path))
    assert service.argv[:3] == ("vllm", "serve", "Qwen/Qwen3-8B")
    assert any(inside == "/root/.cache/huggingface" for _, inside in service.volumes)


@pytest.mark.parametrize(("gpu", "arch"), [("rtx4090-48g", "89"), ("rtx5090", "120"), ("h100-sxm", "90")])
def test_a_fork_format_gets_a_dockerfile_for_the_cards_architecture(
    gpu: str, arch: str, tmp_path, capsys
) -> None:
    text = _emit(capsys, [*PTQ, "--gpu", gpu, "--emit", "dockerfile"], tmp_path, "Dockerfile").read_text()
    assert "https://github.com/PrismML-Eng/llama.cpp" in text and "--branch prism-v7" in text
    assert f"-DCMAKE_CUDA_ARCHITECTURES={arch}" in text and "-DGGML_CUDA=ON" in text
    assert LLAMACPP_IMAGE not in text and 'ENTRYPOINT ["/usr/local/bin/llama-server"]' in text
    runs = [
        line.removeprefix("RUN ")
        for line in text.splitlines()
        if line.startswith("RUN git") or "cmake -B" in line
    ]
    assert runs and all(shlex.split(run) for run in runs)  # quoted words a shell splits back


def test_the_fork_service_builds_that_image_with_the_runtime_settings(tmp_path: Path, capsys) -> None:
    path = _emit(capsys, [*PTQ, "--gpu", "rtx4090-48g", "--emit", "compose"], tmp_path)
    text = path.read_text()
    assert LLAMACPP_IMAGE not in text  # the official image cannot load PTQ1_0
    service = yaml.safe_load(text)["services"]["llamacpp"]
    assert service["build"] == {"context": ".", "dockerfile": "Dockerfile"}
    assert service["image"] == "servelab/llama-server-prismml:sm89"
    assert service["ulimits"] == {"memlock": {"soft": -1, "hard": -1}, "stack": 67108864}
    assert service["ipc"] == "host" and service["healthcheck"]["test"][-1] == "http://localhost:8080/health"
    assert _check_compose(path) == {
        "/models/Qwen3.5-27B-PTQ1_0.gguf": tmp_path / "models" / "Qwen3.5-27B-PTQ1_0.gguf"
    }


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (
            ["plan", "Qwen/Qwen3-8B", "--engine", "llamacpp", "--quant", "Q4_K_M", "--emit", "dockerfile"],
            "Q4_K_M loads in llama.cpp's official image",
        ),
        ([*PTQ, "--gpu", "mi300x", "--emit", "dockerfile"], "needs the card's CUDA compute capability"),
    ],
)
def test_a_dockerfile_only_where_a_fork_is_needed_and_cuda_is_there(argv, needle, capsys) -> None:
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and needle in err and err.count("\n") == 1

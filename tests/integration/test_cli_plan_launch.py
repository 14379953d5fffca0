"""`servelab plan --cmd "…"` and `--compose FILE`: the launch people already run, read with verify's readers
and planned exactly. Command lines are public ones (URLs beside each); the compose file is the field report's
(docs/reference/field-report.md §6: `-ngl 99 -c 262144 -fa on -np 4 --temp 0.7 --top-p 0.95 --top-k 20`,
built from a Dockerfile, health check on /health)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servelab.cli.app import main

FIELD_REPORT_COMPOSE = """\
services:
  llama:
    build:
      context: .
      dockerfile: Dockerfile
    volumes:
      - ./models:/models:ro
    command: [-m, /models/ternary.gguf, -ngl, 99, -c, 262144, -fa, on, -np, 4, --temp, 0.7, --top-p, 0.95,
              --top-k, 20]
    healthcheck:
      test: ["CMD", "curl", "-f", "http://localhost:8080/health"]
  web:
    image: nginx
"""
# vllm-project/vllm#15469 (vLLM 0.7.2, two GPUs): the model word is a directory on the reporter's machine
VLLM_15469 = (
    "CUDA_VISIBLE_DEVICES=0,1 VLLM_USE_V1=1 VLLM_WORKER_MULTIPROC_METHOD=spawn vllm serve "
    "/home/work/anyujie/Qwen/Qwen2.5-VL-3B-Instruct --gpu-memory-utilization 0.9 --swap-space 16 "
    "--max-model-len 4096 --tensor-parallel-size 2 --port 8091 --disable-custom-all-reduce"
)
# the field report's working sglang launch (docs/reference/field-report.md §2)
SGLANG_FIELD_REPORT = (
    "python -m sglang.launch_server --model-path Qwen/Qwen3.5-27B --quantization awq --context-length 262144 "
    "--max-total-tokens 262144 --kv-cache-dtype fp8_e5m2 --mem-fraction-static 0.9"
)


def _plan(capsys, argv: list[str]) -> dict:
    assert main([argv[0], "--json", *argv[1:]]) == 0  # before any words after --
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["plans"]) == 1
    return doc["plans"][0]


def test_the_field_report_compose_is_caught_at_a_quarter_of_the_context(tmp_path: Path, capsys) -> None:
    compose = tmp_path / "docker-compose.yml"
    compose.write_text(FIELD_REPORT_COMPOSE)
    plan = _plan(
        capsys,
        [
            "plan",
            "Qwen/Qwen3.5-27B",
            "--quant",
            "PTQ1_0",
            "--gpu",
            "rtx4090-48g",
            "--engine",
            "llamacpp",
            "--compose",
            str(compose),
        ],
    )
    details = plan["details"]
    assert (details["n_ctx"], details["n_parallel"], details["kv_unified"]) == (262144, 4, False)
    assert details["n_ctx_per_slot"] == plan["context_served"] == 65536
    assert any("gives each slot 65536 tokens" in w for w in plan["warnings"])
    command = plan["command"]
    assert command[command.index("-m") + 1] == "/models/ternary.gguf"  # the launch's own path
    assert command[command.index("-ngl") + 1] == "99"
    same = _plan(
        capsys,
        [
            "plan",
            "Qwen/Qwen3.5-27B",
            "--quant",
            "PTQ1_0",
            "--gpu",
            "rtx4090-48g",
            "--engine",
            "llamacpp",
            "--context",
            "65536",
            "--parallel",
            "4",
            "--",
            "-ngl",
            "99",
        ],
    )
    assert plan["fits"] and plan["memory_bytes"] == same["memory_bytes"]  # the launch is -c 262144 -np 4


def test_a_compose_model_is_read_through_the_volume_on_the_host(tmp_path: Path, capsys) -> None:
    from servelab.modelmake import make_model

    made = make_model("hybrid", tmp_path / "models" / "ternary.gguf")
    compose = tmp_path / "docker-compose.yml"
    compose.write_text(FIELD_REPORT_COMPOSE.replace("262144", "8192").replace("-np, 4", "-np, 2"))
    plan = _plan(capsys, ["plan", "--gpu", "l4", "--engine", "llamacpp", "--compose", str(compose)])
    assert (
        plan["model"] == "servelab-hybrid" and plan["quant"].lower() == made.weight_type.lower()
    )  # read from the file
    assert plan["memory_bytes"]["weights_text"] > 0 and plan["details"]["n_ctx_per_slot"] == 4096
    assert (plan["engine"], plan["details"]["n_parallel"]) == ("llamacpp", 2)


def test_a_vllm_command_from_an_issue_is_planned_with_its_flags(capsys) -> None:
    plan = _plan(capsys, ["plan", "Qwen/Qwen2.5-7B-Instruct", "--gpu", "a100-80g", "--cmd", VLLM_15469])
    assert (plan["engine"], plan["context"], plan["tensor_parallel"]) == ("vllm", 4096, 2)
    line = " ".join(plan["command"])
    assert "--max-model-len 4096" in line and "--tensor-parallel-size 2" in line
    assert "--gpu-memory-utilization 0.9" in line


def test_the_field_report_sglang_launch_is_planned_exactly(capsys) -> None:
    plan = _plan(capsys, ["plan", "--gpu", "rtx4090-48g", "--cmd", SGLANG_FIELD_REPORT])
    assert (plan["engine"], plan["quant"], plan["kv_dtype"], plan["context"]) == (
        "sglang",
        "awq-w4g128",
        "fp8_e5m2",
        262144,
    )
    assert plan["fits"] and plan["details"]["mem_fraction_static"] == 0.9
    assert plan["details"]["max_total_tokens"] == 262144


def test_an_sglang_tp_launch_plans_both_gpus(capsys) -> None:
    command = SGLANG_FIELD_REPORT.replace("--mem-fraction-static 0.9", "--tp 2")
    plan = _plan(capsys, ["plan", "--gpu", "rtx4090-48g", "--cmd", command])
    assert plan["tensor_parallel"] == 2 and "--tp 2" in " ".join(plan["command"])


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--cmd", "-c 4096 -np 2"], "bare flags: name the engine that runs them with --engine"),
        (["--cmd", SGLANG_FIELD_REPORT, "--engine", "vllm"], "launches sglang, not vllm"),
        (["--cmd", "echo hello"], "does not launch a known engine"),
        (["--cmd", "ollama serve"], "Ollama launches are not planned; servelab plans"),
        (["--service", "llama"], "--service names a service of --compose FILE"),
        (["--cmd", "vllm serve 'unclosed"], "check its quotes"),
        (["--cmd", "llama-server -m /nowhere/x.gguf -c 4096"], "/nowhere/x.gguf"),
        ([], "give MODEL"),
    ],
)
def test_launches_that_cannot_be_planned_are_one_line(argv: list[str], needle: str, capsys) -> None:
    assert main(["plan", *argv]) == 2
    out, err = capsys.readouterr()
    assert out == "" and needle in err and err.count("\n") == 1, err


def test_a_compose_without_an_engine_service_names_the_services(tmp_path: Path, capsys) -> None:
    compose = tmp_path / "c.yml"
    compose.write_text(FIELD_REPORT_COMPOSE)
    assert main(["plan", "--compose", str(compose), "--service", "db"]) == 2
    assert "no service 'db'; services: llama, web" in capsys.readouterr().err


# sgl-project/sglang#7691 ran lmsysorg/sglang:v0.4.8.post1-rocm630-srt; the same launch on an H100 here
SGLANG_IMAGE_LAUNCH = (
    "docker run --gpus all --ipc=host lmsysorg/sglang:{tag} python3 -m sglang.launch_server"
    " --model-path meta-llama/Llama-3.1-8B-Instruct --context-length 8192"
)


def test_an_image_tag_plans_that_releases_rules(capsys) -> None:
    """0.4.4.post1 keeps the TP table's 0.88; 0.4.8.post1 reserves (9.5 + 1/2) GiB below 90 GiB; latest: today's."""
    old = _plan(
        capsys, ["plan", "--gpu", "h100-sxm", "--cmd", SGLANG_IMAGE_LAUNCH.format(tag="v0.4.4.post1-cu124")]
    )
    tiers = _plan(
        capsys, ["plan", "--gpu", "h100-sxm", "--cmd", SGLANG_IMAGE_LAUNCH.format(tag="v0.4.8.post1")]
    )
    now = _plan(capsys, ["plan", "--gpu", "h100-sxm", "--cmd", SGLANG_IMAGE_LAUNCH.format(tag="latest")])
    assert old["details"]["mem_fraction_static"] == 0.88 and old["details"]["engine_version"] == "0.4.4.post1"
    assert tiers["details"]["mem_fraction_static"] == round((81559 - 10 * 1024) / 81559, 3)
    assert now["details"]["mem_fraction_static"] == round((81559 - 13440) / 81559, 3)
    assert "engine_version" not in now["details"]
    assert any("sglang 0.4.4.post1's rules" in w for w in old["warnings"])
    assert old["memory_bytes"]["kv_cache"] > now["memory_bytes"]["kv_cache"]


def test_a_compose_image_tag_picks_the_llamacpp_build(tmp_path: Path, capsys) -> None:
    """Before b9460 the reserved graph holds the logits of every ubatch token (Qwen3.5's 248,320-word vocab)."""
    compose = tmp_path / "docker-compose.yml"
    service = (
        "services:\n  llama:\n    image: ghcr.io/ggml-org/llama.cpp:server-cuda-{tag}\n    volumes:\n"
        "      - ./models:/models:ro\n    command: [-m, /models/m.gguf, -c, 4096, -np, 2, -ub, 512]\n"
    )
    argv = [
        "plan",
        "Qwen/Qwen3.5-35B-A3B",
        "--quant",
        "Q4_K_M",
        "--gpu",
        "h100-sxm",
        "--compose",
        str(compose),
    ]
    compose.write_text(service.format(tag="b8354"))
    old = _plan(capsys, argv)
    compose.write_text(service.format(tag="b9460"))
    now = _plan(capsys, argv)
    assert old["details"]["engine_version"] == "b8354" and now["details"]["engine_version"] == "b9460"
    logits = 248320 * 512 * 4
    assert old["details"]["compute_buffer_bytes"] > logits > now["details"]["compute_buffer_bytes"]


def test_engine_version_from_the_cli_and_its_refusals(capsys) -> None:
    base = ["plan", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "h100-sxm", "--quant", "bf16"]
    plan = _plan(
        capsys, [*base, "--engine", "sglang", "--engine-version", "0.4.4.post1", "--context", "8192"]
    )
    assert plan["details"]["mem_fraction_static"] == 0.88
    tagged = SGLANG_IMAGE_LAUNCH.format(tag="v0.4.4.post1")
    for argv, needle in (
        ([*base, "--engine-version", "0.4.4"], "is one engine's release: name it with --engine"),
        ([*base, "--engine", "sglang", "--engine-version", "nightly"], "is not a version number"),
        ([*base, "--engine", "llamacpp", "--engine-version", "b12"], "shallow clone"),
        (
            ["plan", "--gpu", "h100-sxm", "--cmd", tagged, "--engine-version", "0.5.3"],
            "(release 0.4.4.post1)",
        ),
    ):
        assert main(argv) == 2
        out, err = capsys.readouterr()
        assert out == "" and needle in err and err.count("\n") == 1, err


def test_a_vllm_image_tag_reaches_its_profile_rules(capsys) -> None:
    """vllm-project/vllm#23278's gpt-oss-120b on an H100 under v0.10.1: the MXFP4 experts go to Marlin there."""
    launch = "docker run --gpus all vllm/vllm-openai:{tag} --model openai/gpt-oss-120b --max-model-len 8192"
    old = _plan(capsys, ["plan", "--gpu", "h100-sxm", "--cmd", launch.format(tag="v0.10.1")])
    now = _plan(capsys, ["plan", "--gpu", "h100-sxm", "--cmd", launch.format(tag="latest")])
    assert old["details"]["engine_version"] == "0.10.1" and "engine_version" not in now["details"]
    assert any("vLLM 0.10.1's rules" in w for w in old["warnings"])
    assert (
        old["memory_bytes"]["weights_text"] > now["memory_bytes"]["weights_text"]
    )  # Marlin pads the experts

"""Launch recipes: exact flag spelling per engine, shell quoting, loopback by default, compose with health check."""

from __future__ import annotations

import shlex

import yaml

from servelab.engines.llamacpp import cmdline as llamacpp
from servelab.engines.registry import get_engine
from servelab.engines.sglang import cmdline as sglang
from servelab.engines.vllm import cmdline as vllm
from servelab.hardware.gpus import find_gpu
from servelab.model.load import load_model
from servelab.plan.emit import compose_service, shell_line
from servelab.plan.make import make_plan


def test_brief_sglang_flags() -> None:
    # brief step 2: --quantization awq --context-length 262144 --max-total-tokens 262144
    # --kv-cache-dtype fp8_e5m2 --mem-fraction-static 0.9, no --tp
    argv = sglang.command(
        "Qwen/Qwen3.5-27B-AWQ",
        quant="awq-w4g128",
        context_length=262144,
        kv_cache_dtype="fp8_e5m2",
        max_total_tokens=262144,
        mem_fraction_static=0.9,
    )
    line = shlex.join(argv)
    assert argv[:3] == ["python", "-m", "sglang.launch_server"]
    for flag in (
        "--quantization awq",
        "--context-length 262144",
        "--max-total-tokens 262144",
        "--kv-cache-dtype fp8_e5m2",
        "--mem-fraction-static 0.9",
        "--host 127.0.0.1",
    ):
        assert flag in line
    assert "--tp" not in argv


def test_vllm_flags() -> None:
    argv = vllm.command(
        "m",
        quant="fp8",
        max_model_len=32768,
        kv_cache_dtype="fp8_e5m2",
        tp=2,
        gpu_memory_utilization=0.92,
        max_num_seqs=64,
    )
    line = shlex.join(argv)
    assert argv[:3] == ["vllm", "serve", "m"]
    for flag in (
        "--max-model-len 32768",
        "--quantization fp8",
        "--kv-cache-dtype fp8_e5m2",
        "--tensor-parallel-size 2",
        "--gpu-memory-utilization 0.92",
        "--max-num-seqs 64",
    ):
        assert flag in line


def test_llamacpp_flags_make_the_slot_count_explicit() -> None:
    argv = llamacpp.command(
        "/models/q.gguf",
        n_ctx=262144,
        n_parallel=4,
        kv_unified=True,
        cache_type_k="q8_0",
        cache_type_v="q8_0",
    )
    line = shlex.join(argv)
    for flag in (
        "-m /models/q.gguf",
        "-c 262144",
        "-np 4",
        "--kv-unified",
        "-fa on",
        "-ctk q8_0",
        "-ctv q8_0",
        "--host 127.0.0.1",
    ):
        assert flag in line


def test_catalog_id_gets_a_gguf_placeholder() -> None:
    assert llamacpp.gguf_path("Qwen/Qwen3.5-27B", "Q4_K_M") == "models/Qwen3.5-27B-Q4_K_M.gguf"


def test_paths_with_spaces_and_quotes_are_quoted() -> None:
    argv = llamacpp.command("/my models/it's.gguf", n_ctx=4096)
    line = shell_line(argv)
    assert shlex.split(line) == argv
    assert "'/my models/it'\"'\"'s.gguf'" in line


def test_compose_service_binds_loopback_and_checks_health() -> None:
    argv = sglang.command("m", quant="bf16", context_length=8192, kv_cache_dtype="auto")
    doc = yaml.safe_load(
        compose_service("sglang", argv, image=get_engine("sglang").image, port=30000, health_path="/health")
    )
    service = doc["services"]["sglang"]
    assert service["ports"] == ["127.0.0.1:30000:30000"]
    assert service["healthcheck"]["test"][-1] == "http://localhost:30000/health"
    entry = service["entrypoint"]
    assert entry[entry.index("--host") + 1] == "0.0.0.0"  # inside the container; published on loopback only
    assert service["deploy"]["resources"]["reservations"]["devices"][0]["count"] == 1


def test_compose_honours_an_explicit_host() -> None:
    text = compose_service(
        "x",
        ["llama-server", "--host", "127.0.0.1", "--port", "8080"],
        image="i",
        port=8080,
        health_path="/health",
        host="0.0.0.0",
        gpus=2,
    )
    assert "0.0.0.0:8080:8080" in text


def test_plan_command_matches_its_line() -> None:
    plan = make_plan(
        load_model("Qwen/Qwen3-8B"),
        find_gpu("rtx4090"),
        engine="llamacpp",
        quant="Q4_K_M",
        context=32768,
        kv_dtype="q8_0",
    )
    assert shlex.split(plan.command_line) == list(plan.command)
    assert "-c" in plan.command and plan.command[plan.command.index("-c") + 1] == "32768"


def test_compose_mounts_local_model_files_where_the_container_reads_them() -> None:
    argv = [
        "llama-server",
        "-m",
        "/data/gguf/x.gguf",
        "-md",
        "/data/drafts/d.gguf",
        "--host",
        "127.0.0.1",
        "--port",
        "8080",
    ]
    service = yaml.safe_load(compose_service("llamacpp", argv, image="img", port=8080, health_path="/health"))
    service = service["services"]["llamacpp"]
    assert service["entrypoint"][:5] == ["llama-server", "-m", "/models/0/x.gguf", "-md", "/models/1/d.gguf"]
    assert (
        "/data/gguf:/models/0:ro" in service["volumes"] and "/data/drafts:/models/1:ro" in service["volumes"]
    )
    hub = yaml.safe_load(
        compose_service(
            "vllm", ["vllm", "serve", "Qwen/Qwen3-8B"], image="img", port=8000, health_path="/health"
        )
    )
    assert hub["services"]["vllm"]["entrypoint"][2] == "Qwen/Qwen3-8B"
    assert "./models:/models" in hub["services"]["vllm"]["volumes"]

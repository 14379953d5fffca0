"""`servelab verify URL --cmd …` through the CLI: an engine launch, bare flags, and a command that launches none.

Servers are the recorded sglang and vLLM endpoint fixtures on 127.0.0.1 (see test_verify_fixtures.py).
"""

from __future__ import annotations

import json

import pytest

from servelab.cli.app import main
from tests.integration.test_verify_fixtures import serve_fixture  # noqa: F401 (a fixture)

SGLANG_FLAGS = (
    "--model-path /models/Qwen3.5-27B-AWQ --context-length 262144 --max-total-tokens 262144 "
    "--kv-cache-dtype fp8_e5m2"
)


@pytest.mark.parametrize(
    "cmd",
    [
        f"python -m sglang.launch_server {SGLANG_FLAGS}",
        f"CUDA_VISIBLE_DEVICES=0 /opt/venv/bin/python3 -u -m sglang.launch_server {SGLANG_FLAGS}",
        f"docker run --gpus all --shm-size 32g -p 30000:30000 -e HF_TOKEN=x lmsysorg/sglang:v0.5.9 {SGLANG_FLAGS}",
        f"docker run --rm lmsysorg/sglang python3 -m sglang.launch_server {SGLANG_FLAGS}",
        SGLANG_FLAGS,  # bare flags of the engine that answers
        "--model-path '/models/Qwen3.5-27B-AWQ' --context-length=\"262144\"",  # shell quoting, split by shlex
    ],
)
def test_an_sglang_launch_or_its_bare_flags_verify_clean(serve_fixture, capsys, cmd: str) -> None:  # noqa: F811
    server = serve_fixture("sglang/awq-262k")
    assert main(["verify", server.url, "--cmd", cmd, "--strict", "--json"]) == 0
    out, err = capsys.readouterr()
    result = json.loads(out)
    assert (result["engine"], result["mismatches"], err) == ("sglang", [], "")
    assert result["asked"]["context"] == 262144 and "context" in result["matched"]


def test_a_vllm_image_gets_its_flags_read(serve_fixture, capsys) -> None:  # noqa: F811
    server = serve_fixture("vllm/fp8-ignored")
    cmd = (
        "docker run --runtime nvidia --gpus all -v ~/.cache/huggingface:/root/.cache/huggingface --ipc=host "
        "vllm/vllm-openai:latest --model /m --served-model-name qwen3-30b-instruct --kv-cache-dtype fp8"
    )
    assert main(["verify", server.url, "--cmd", cmd, "--strict", "--json"]) == 1
    out, err = capsys.readouterr()
    assert [m["key"] for m in json.loads(out)["mismatches"]] == ["kv_dtype"] and err == ""


@pytest.mark.parametrize(
    ("cmd", "shown"),
    [
        ("ls -la", "'ls -la'"),
        ("CUDA_VISIBLE_DEVICES=0 ls -la", "'ls -la'"),
        ("'llama-server -c 8192'", "\"'llama-server -c 8192'\""),  # one quoted word is no program
        ("docker run ubuntu:24.04 ls -la", "'ls -la'"),
        ("vllm bench serve --model m", "'vllm bench serve'"),
    ],
)
def test_a_command_that_launches_no_engine_is_a_usage_error(capsys, cmd: str, shown: str) -> None:
    # refused before any request: nothing listens on port 9
    assert main(["verify", "http://127.0.0.1:9", "--cmd", cmd]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(
        f"servelab: error: --cmd: {shown} does not launch a known engine; give llama-server …, "
    )
    assert "ollama serve" in err and "bare flags starting with '-'" in err


def test_an_unbalanced_quote_is_a_usage_error(capsys) -> None:
    assert (
        main(["verify", "http://127.0.0.1:9", "--cmd", "llama-server -m '/models/my model.gguf -c 8192"]) == 2
    )
    out, err = capsys.readouterr()
    assert out == ""
    assert (
        err
        == "servelab: error: --cmd: cannot split the command line (No closing quotation); check its quotes\n"
    )


@pytest.mark.parametrize(
    ("value", "given"),
    [("-1", "-1.0"), ("0", "0.0"), ("nan", "nan"), ("inf", "inf"), ("1e9", "1000000000.0")],
)
def test_a_timeout_out_of_range_is_one_line_before_any_request(capsys, value, given) -> None:
    assert main(["verify", "http://127.0.0.1:9", "--timeout", value]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert (
        captured.err
        == f"servelab: error: --timeout must be a number above 0 and at most 3,600 seconds, got {given}\n"
    )

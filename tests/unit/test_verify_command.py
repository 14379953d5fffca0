"""Engine command lines → what was asked (llama.cpp, sglang, vLLM flag parsing)."""

from __future__ import annotations

import shlex

import pytest

from servelab.engines.flags import Flag, scan, to_int
from servelab.engines.llamacpp import cmdline as llamacpp
from servelab.engines.sglang import cmdline as sglang
from servelab.engines.vllm import cmdline as vllm
from servelab.errors import ConfigError
from servelab.verify.asked import from_command
from servelab.verify.command import EngineCommand, engine_of_command, read_command

FIELD_REPORT_LLAMA = "-ngl 99 -c 262144 -fa on -np 4 --temp 0.7 --top-p 0.95 --top-k 20"
FIELD_REPORT_SGLANG = (
    "python -m sglang.launch_server --model-path /models/Qwen3.5-27B-AWQ --quantization awq "
    "--context-length 262144 --max-total-tokens 262144 --kv-cache-dtype fp8_e5m2 --mem-fraction-static 0.9"
)


def test_llamacpp_field_report_flags() -> None:
    launch = llamacpp.parse(shlex.split("/app/llama-server -m /models/m.gguf " + FIELD_REPORT_LLAMA))
    assert (launch.ctx_size, launch.parallel, launch.gpu_layers, launch.flash_attn) == (262144, 4, "99", True)
    assert launch.kv_unified is None and launch.model == "/models/m.gguf"
    assert llamacpp.expectations(launch) == {"context": 262144, "slots": 4, "model": "m.gguf"}


def test_llamacpp_long_spellings_equals_and_switches() -> None:
    launch = llamacpp.parse(
        [
            "--ctx-size=4096",
            "--parallel",
            "2",
            "--kv-unified",
            "-ctk",
            "q8_0",
            "-ctv",
            "q8_0",
            "-fa",
            "--jinja",
        ]
    )
    assert (launch.ctx_size, launch.parallel, launch.kv_unified) == (4096, 2, True)
    assert (launch.cache_type_k, launch.cache_type_v, launch.flash_attn) == ("q8_0", "q8_0", True)
    assert llamacpp.parse(["-no-kvu", "-fa", "off"]).kv_unified is False
    assert llamacpp.parse(["-fa", "off"]).flash_attn is False


def test_llamacpp_last_flag_wins_and_unknown_flags_keep_their_values_apart() -> None:
    launch = llamacpp.parse(["-c", "1024", "--temp", "0.7", "-c", "2048", "--seed", "-1", "-np", "3"])
    assert (launch.ctx_size, launch.parallel) == (2048, 3)


def test_llamacpp_expectations_draft_alias_and_zero_context() -> None:
    launch = llamacpp.parse(["-m", "big.gguf", "-md", "draft.gguf", "-a", "served,other", "-c", "0"])
    assert llamacpp.expectations(launch) == {"model": "served", "speculative": True}


def test_llamacpp_per_slot_cap_shapes_the_asked_context() -> None:
    launch = llamacpp.parse(["-c", "65536", "-np", "4", "--kv-unified-per-slot", "16384"])
    assert llamacpp.expectations(launch)["context"] == 16384


def test_llamacpp_bad_number_names_the_flag() -> None:
    with pytest.raises(ConfigError, match=r"-c/--ctx-size expects a whole number, got 'lots'"):
        llamacpp.parse(["-c", "lots"])


def test_flag_missing_its_value() -> None:
    with pytest.raises(ConfigError, match="-np needs a value"):
        llamacpp.parse(["-c", "8", "-np"])


def test_sglang_field_report_command() -> None:
    asked = from_command(FIELD_REPORT_SGLANG)
    assert asked.engine == "sglang"
    assert asked.values == {
        "context": 262144,
        "max_total_tokens": 262144,
        "kv_dtype": "fp8_e5m2",
        "model": "/models/Qwen3.5-27B-AWQ",
    }
    assert asked.launch.mem_fraction_static == 0.9 and asked.launch.quantization == "awq"


def test_sglang_tp_and_speculative() -> None:
    launch = sglang.parse(
        shlex.split("sglang serve --model x --tp 2 --speculative-algorithm EAGLE --kv-cache-dtype auto")
    )
    assert sglang.expectations(launch) == {"tp_size": 2, "model": "x", "speculative": True}


def test_vllm_serve_positional_model_and_human_readable_length() -> None:
    launch = vllm.parse(shlex.split("vllm serve Qwen/Qwen3-8B --max-model-len 32K -tp 2 --max-num-seqs 64"))
    assert (launch.model, launch.max_model_len, launch.tp_size, launch.max_num_seqs) == (
        "Qwen/Qwen3-8B",
        32768,
        2,
        64,
    )
    assert vllm.parse(["vllm", "serve", "m", "--max-model-len", "32k"]).max_model_len == 32000


def test_vllm_speculative_config_and_served_name() -> None:
    argv = ["vllm", "serve", "m", "--served-model-name", "chat", "--speculative-config", '{"method": "mtp"}']
    launch = vllm.parse(argv)
    assert launch.speculative_config == {"method": "mtp"}
    assert vllm.expectations(launch) == {"model": "chat", "speculative": True}


@pytest.mark.parametrize(
    ("command", "engine"),
    [
        ("llama-server -c 8", "llamacpp"),
        ("/opt/llama.cpp/build/bin/llama-server -c 8", "llamacpp"),
        ("python3 -m sglang.launch_server --model-path x", "sglang"),
        ("vllm serve x", "vllm"),
        ("python -m vllm.entrypoints.openai.api_server --model x", "vllm"),
        ("python3 -u -m vllm.entrypoints.api_server --model x", "vllm"),
        ("/usr/local/bin/vllm serve x", "vllm"),
        ("sglang serve --model-path x", "sglang"),
        ("/usr/bin/ollama serve", "ollama"),
        ("-c 8192 -np 4", None),
        ("vllm bench serve", None),
        ("cat sglang.log", None),
        ("python -m http.server", None),
        ("ollama run llama3", None),
    ],
)
def test_engine_of_command(command: str, engine: str | None) -> None:
    assert engine_of_command(shlex.split(command)) == engine


def test_bare_flags_need_an_engine_hint() -> None:
    assert from_command("-c 8192 -np 4", engine="llamacpp").values == {"context": 8192, "slots": 4}
    with pytest.raises(ConfigError, match=r"bare flags '-c 8192 -np' need an engine, and none answers"):
        from_command("-c 8192 -np 4")


def test_scan_inline_values_and_positionals() -> None:
    flags = (Flag(("--n",), "n"), Flag(("--on",), "on", value=True))
    assert scan(["serve", "--n=3", "--on", "model"], flags) == ({"n": "3", "on": True}, ["serve", "model"])


@pytest.mark.parametrize(
    ("text", "value"), [("1k", 1000), ("1K", 1024), ("25.6k", 25600), ("2M", 2097152), ("77", 77)]
)
def test_to_int_suffixes(text: str, value: int) -> None:
    assert to_int({"x": text}, "x", "--x") == value


@pytest.mark.parametrize(
    ("command", "engine", "argv", "environment"),
    [
        (
            "CUDA_VISIBLE_DEVICES=0,1 llama-server -c 8",
            "llamacpp",
            ("llama-server", "-c", "8"),
            {"CUDA_VISIBLE_DEVICES": "0,1"},
        ),
        ("env A=1 nohup vllm serve m", "vllm", ("vllm", "serve", "m"), {"A": "1"}),
        (
            "docker run --rm -it --gpus all -p 8000:8000 --ipc=host -e HF_TOKEN=t vllm/vllm-openai:v0.9 --model m",
            "vllm",
            ("--model", "m"),
            {"HF_TOKEN": "t"},
        ),
        (
            "docker run --gpus all lmsysorg/sglang:latest python3 -m sglang.launch_server --model-path m",
            "sglang",
            ("python3", "-m", "sglang.launch_server", "--model-path", "m"),
            {},
        ),
        (
            "podman run --entrypoint /app/llama-server localbuild:1 -c 8",
            "llamacpp",
            ("/app/llama-server", "-c", "8"),
            {},
        ),
        ("docker run my-build:1 -c 8", None, ("-c", "8"), {}),
        ("--ctx-size 8", None, ("--ctx-size", "8"), {}),
        ("uv run --with flashinfer vllm serve m", "vllm", ("vllm", "serve", "m"), {}),
        (
            "HF_HOME=/h uvx --from 'sglang[all]' python -m sglang.launch_server --tp 2",
            "sglang",
            ("python", "-m", "sglang.launch_server", "--tp", "2"),
            {"HF_HOME": "/h"},
        ),
        (
            "sudo -E numactl -N 0 -m 0 /opt/llama-server -c 8",
            "llamacpp",
            ("/opt/llama-server", "-c", "8"),
            {},
        ),
        ("taskset -c 0-7 ollama serve", "ollama", ("ollama", "serve"), {}),
        ("sudo docker run -e A=1 vllm/vllm-openai:v0.9 --model m", "vllm", ("--model", "m"), {"A": "1"}),
    ],
)
def test_read_command_takes_prefixes_and_containers_apart(command, engine, argv, environment) -> None:
    got = read_command(command)
    assert got == EngineCommand(engine, argv, environment, got.image)
    assert (got.image is not None) == ("docker run" in command or "podman run" in command)  # none outside


def test_the_container_image_is_kept_for_its_tag() -> None:
    assert (
        read_command("docker run --gpus all vllm/vllm-openai:v0.10.1 --model m").image
        == "vllm/vllm-openai:v0.10.1"
    )
    assert (
        read_command(["--model", "m"], image="lmsysorg/sglang:v0.4.8.post1").image
        == "lmsysorg/sglang:v0.4.8.post1"
    )


@pytest.mark.parametrize(
    "command",
    [
        "ls -la",
        "",
        "X=1",
        "bash -c 'llama-server -c 8'",
        "'llama-server -c 8'",
        "docker run ubuntu:24.04 ls -la",
        "docker run --rm",
        "uv run python train.py",
        "sudo ls",
    ],
)
def test_read_command_refuses_what_launches_no_engine(command: str) -> None:
    with pytest.raises(ConfigError, match=r"^--cmd: .*(does not launch a known engine|no image found)"):
        read_command(command)


def test_ollama_serve_reads_its_environment() -> None:
    asked = from_command(
        "OLLAMA_CONTEXT_LENGTH=8192 OLLAMA_NUM_PARALLEL=2 OLLAMA_KV_CACHE_TYPE=q8_0 ollama serve"
    )
    assert (asked.engine, asked.values) == ("ollama", {"context": 8192, "slots": 2, "kv_dtype": "q8_0"})
    with pytest.raises(ConfigError, match="'ollama serve' sets nothing verify can check for ollama"):
        from_command("ollama serve")

"""docker-compose services → what was asked; --expect and --plan parsing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servelab.errors import ConfigError
from servelab.verify.asked import from_plan, parse_expect
from servelab.verify.compose import from_compose, load_service

FIELD_REPORT = """\
services:
  llama:
    build:
      context: .
      dockerfile: Dockerfile
    command:
      - -m
      - /models/ternary.gguf
      - -ngl
      - 99
      - -c
      - 262144
      - -fa
      - on
      - -np
      - 4
      - --temp
      - 0.7
    healthcheck:
      test: ["CMD", "curl", "-f", "http://localhost:8080/health"]
"""


def _write(tmp_path: Path, text: str, name: str = "compose.yml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_field_report_list_command_with_bare_yaml_words(tmp_path: Path) -> None:
    service = load_service(_write(tmp_path, FIELD_REPORT))
    assert service.name == "llama" and service.image is None
    assert service.argv[:10] == (
        "-m",
        "/models/ternary.gguf",
        "-ngl",
        "99",
        "-c",
        "262144",
        "-fa",
        "on",
        "-np",
        "4",
    )
    asked = from_compose(_write(tmp_path, FIELD_REPORT), engine="llamacpp")
    assert asked.values == {"context": 262144, "slots": 4, "model": "ternary.gguf"}
    assert asked.sources["context"] == "compose llama"
    assert asked.launch.flash_attn is True


def test_string_command_and_image_hint(tmp_path: Path) -> None:
    text = """
services:
  web: {image: "nginx:1", command: "nginx -g 'daemon off;'"}
  engine:
    image: ghcr.io/ggml-org/llama.cpp:server-cuda
    command: "-m /m.gguf -c 32768 -np 2 --kv-unified"
"""
    path = _write(tmp_path, text)
    service = load_service(path)
    assert (service.name, service.engine_hint) == ("engine", "llamacpp")
    assert from_compose(path).values == {"context": 32768, "slots": 2, "model": "m.gguf"}


def test_sglang_service_named_by_entrypoint(tmp_path: Path) -> None:
    text = """
services:
  sg:
    image: lmsysorg/sglang:latest
    entrypoint: ["python3", "-m", "sglang.launch_server"]
    command: ["--model-path", "/m", "--context-length", "65536", "--tp", "2"]
"""
    asked = from_compose(_write(tmp_path, text))
    assert (asked.engine, asked.values) == ("sglang", {"context": 65536, "tp_size": 2, "model": "/m"})


def test_compose_errors_are_one_line_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no services: section"):
        load_service(_write(tmp_path, "version: '3'\n"))
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_service(_write(tmp_path, "services: [\n"))
    with pytest.raises(ConfigError, match=r"missing\.yml: no such file"):
        load_service(tmp_path / "missing.yml")
    two = "services:\n  a: {image: 'vllm/vllm-openai', command: 'vllm serve x'}\n  b: {image: 'vllm/vllm-openai', command: 'vllm serve y'}\n"
    with pytest.raises(ConfigError, match=r"several services \(a, b\); name one with --service"):
        load_service(_write(tmp_path, two))
    assert load_service(_write(tmp_path, two), "b").argv == ("vllm", "serve", "y")
    with pytest.raises(ConfigError, match="no service 'c'; services: a, b"):
        load_service(_write(tmp_path, two), "c")


def test_service_without_command(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="has no command"):
        from_compose(_write(tmp_path, "services:\n  x: {image: 'ollama/ollama'}\n"))


def test_expect_keys_values_and_errors() -> None:
    asked = parse_expect(["context=8192", "kv-dtype=q8_0", "speculative=on", "max_total_tokens=1_000"])
    assert asked.values == {
        "context": 8192,
        "kv_dtype": "q8_0",
        "speculative": True,
        "max_total_tokens": 1000,
    }
    assert set(asked.sources.values()) == {"--expect"}
    with pytest.raises(ConfigError, match=r"unknown key 'ctx'; valid keys: context, slots, kv_dtype"):
        parse_expect(["ctx=1"])
    with pytest.raises(ConfigError, match="not key=value"):
        parse_expect(["context"])
    with pytest.raises(ConfigError, match="context= needs a whole number, got 'big'"):
        parse_expect(["context=big"])
    with pytest.raises(ConfigError, match="speculative= needs true or false"):
        parse_expect(["speculative=maybe"])


def test_later_source_wins_key_by_key(tmp_path: Path) -> None:
    from_file = from_compose(_write(tmp_path, FIELD_REPORT), engine="llamacpp")
    merged = from_file.merged(parse_expect(["context=65536"]))
    assert merged.values == {"context": 65536, "slots": 4, "model": "ternary.gguf"}
    assert merged.sources == {"context": "--expect", "slots": "compose llama", "model": "compose llama"}
    assert merged.engine == "llamacpp" and merged.launch is from_file.launch


def test_plan_file_documented_fields(tmp_path: Path) -> None:
    plan = {
        "plans": [
            {"engine": "llama.cpp", "context": 262144, "kv_dtype": "q8_0", "slots": 1},
            {"engine": "sglang"},
        ]
    }
    asked = from_plan(_write(tmp_path, json.dumps(plan), "plan.json"))
    assert asked.engine == "llamacpp"
    assert asked.values == {"context": 262144, "kv_dtype": "q8_0", "slots": 1}


def test_plan_with_a_command_reads_its_flags(tmp_path: Path) -> None:
    plan = {
        "plans": [
            {
                "engine": "sglang",
                "context": 131072,
                "command": ["python", "-m", "sglang.launch_server", "--model-path", "/m", "--tp", "2"],
            }
        ]
    }
    asked = from_plan(_write(tmp_path, json.dumps(plan), "plan.json"))
    assert asked.values == {"tp_size": 2, "model": "/m", "context": 131072}
    assert asked.launch.tp_size == 2


def test_plan_of_a_gguf_expects_the_file_its_command_loads_not_the_display_name(tmp_path: Path) -> None:
    plan = {
        "plans": [
            {
                "engine": "llamacpp",
                "model": "servelab-hybrid",
                "context": 8192,
                "slots": 4,
                "command": ["llama-server", "-m", "/models/x.gguf", "-c", "32768", "-np", "4"],
            }
        ]
    }
    asked = from_plan(_write(tmp_path, json.dumps(plan), "plan.json"))
    assert asked.values["model"] == "x.gguf" and asked.values["context"] == 8192


def test_plan_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not JSON"):
        from_plan(_write(tmp_path, "{", "p.json"))
    with pytest.raises(ConfigError, match=r"--plan .*p\.json: no plan entries \(a non-empty 'plans' list"):
        from_plan(_write(tmp_path, '{"plans": []}', "p.json"))
    with pytest.raises(ConfigError, match=r"plans\[0\] gives nothing verify can check"):
        from_plan(_write(tmp_path, '{"plans": [{"quant": "q8_0"}]}', "p.json"))


def test_a_minimal_hand_written_plan_is_enough(tmp_path: Path) -> None:
    asked = from_plan(_write(tmp_path, '{"plans": [{"context": 8192}]}', "p.json"))
    assert (asked.values, asked.sources, asked.engine) == ({"context": 8192}, {"context": "--plan"}, None)


def test_llama_arg_environment_is_read_and_the_command_line_wins(tmp_path: Path) -> None:
    text = """
services:
  llamacpp-server:
    image: ghcr.io/ggml-org/llama.cpp:server
    environment:
      LLAMA_ARG_MODEL: /models/m.gguf
      LLAMA_ARG_CTX_SIZE: 4096
      LLAMA_ARG_N_PARALLEL: 2
      LLAMA_ARG_KV_UNIFIED: "true"
    command: ["-c", "16384"]
"""
    asked = from_compose(_write(tmp_path, text))
    assert asked.values == {"context": 16384, "slots": 2, "model": "m.gguf"}
    assert asked.launch.kv_unified is True
    listed = text.replace("LLAMA_ARG_MODEL: /models/m.gguf", "- LLAMA_ARG_MODEL=/models/m.gguf").replace(
        '      LLAMA_ARG_CTX_SIZE: 4096\n      LLAMA_ARG_N_PARALLEL: 2\n      LLAMA_ARG_KV_UNIFIED: "true"\n',
        "      - LLAMA_ARG_N_PARALLEL=3\n",
    )
    assert from_compose(_write(tmp_path, listed)).values == {"context": 16384, "slots": 3, "model": "m.gguf"}

"""Every file the user names is opened only when regular, read within a size bound, and parsed within depth,
number and alias limits (issue 26.1): a FIFO, /dev/zero, a "billion laughs" YAML, 10,000-deep nesting and a
5,000-digit number each give one line and exit 2, in bounded time and memory.

The commands run as real processes under a 1.5 GB address-space limit and a deadline, so a command that
would hang or stream /dev/zero into memory fails the test instead of the machine."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from tests.bench_sim import sim_process

CLI = [sys.executable, "-c", "import sys; from servelab.cli.app import main; sys.exit(main())"]
MEMORY_LIMIT = 1536 << 20
DEADLINE_S = 60

LAUGHS = (
    "a: &a ["
    + ",".join(["lol"] * 10)
    + "]\n"
    + "".join(
        f"{chr(ord('a') + i)}: &{chr(ord('a') + i)} [" + ",".join([f"*{chr(ord('a') + i - 1)}"] * 10) + "]\n"
        for i in range(1, 9)
    )
)
COMPOSE_LAUGHS = LAUGHS + "services:\n  s:\n    image: vllm/vllm-openai\n    command: *i\n"
# anchored inside a key bench reads (its error message once printed the value whole)
CONFIG_LAUGHS = "model:\n" + "".join(f"  - {line[3:]}" for line in LAUGHS.splitlines(keepends=True))
DEEP_YAML = "services: " + "[" * 10_000 + "]" * 10_000 + "\n"
DEEP_JSON = '{"plans": ' + "[" * 10_000 + "]" * 10_000 + "}"
LONG_NUMBER = "9" * 5000


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def _run(args: list[str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    return subprocess.run(
        [*CLI, *args], capture_output=True, text=True, timeout=DEADLINE_S, preexec_fn=_limit, env=env
    )


def _one_line(result: subprocess.CompletedProcess[str], *pieces: str) -> None:
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stdout == "" and result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    for piece in pieces:
        assert piece in result.stderr, result.stderr


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "pipe"
    os.mkfifo(path)
    return path


def _commands(path: Path, tmp_path: Path) -> dict[str, list[str]]:
    db = tmp_path / "none.db"
    return {
        "config": ["bench", "http://127.0.0.1:9", "--config", str(path), "--db", str(db)],
        "report --plan": ["report", "--db", str(db), "--plan", str(path), "-o", str(tmp_path / "r.html")],
        "predict --plan": ["predict", "--plan", str(path)],
        "logs": ["logs", str(path)],
        "logs --follow": ["logs", "--follow", str(path)],
        "trace": ["bench", "http://127.0.0.1:9", "--trace", str(path), "--db", str(db)],
        "logs --signatures": ["logs", "-", "--signatures", str(path)],
        "spec LOG": ["spec", str(path)],
    }


@pytest.mark.parametrize(
    "what",
    [
        "config",
        "report --plan",
        "predict --plan",
        "logs",
        "logs --follow",
        "trace",
        "logs --signatures",
        "spec LOG",
    ],
)
@pytest.mark.parametrize("special", ["fifo", "/dev/zero"])
def test_a_fifo_or_a_device_is_refused_not_read(what: str, special: str, tmp_path: Path, fifo: Path) -> None:
    path = fifo if special == "fifo" else Path("/dev/zero")
    _one_line(_run(_commands(path, tmp_path)[what]), "not a regular file")


@pytest.mark.parametrize("special", ["fifo", "/dev/zero"])
def test_verify_compose_refuses_a_fifo_or_a_device(special: str, fifo: Path) -> None:
    path = fifo if special == "fifo" else Path("/dev/zero")
    with sim_process("--itl-ms", "1") as url:
        result = _run(["verify", url, "--compose", str(path)])
    _one_line(result, f"--compose {path}: not a regular file")


@pytest.mark.parametrize(
    "text, problem",
    [
        (COMPOSE_LAUGHS, "more than 100,000 values once its aliases are expanded"),
        (DEEP_YAML, "nested over 100 deep"),
        (
            f"services:\n  s:\n    image: vllm/vllm-openai\n    command: [--port, {LONG_NUMBER}]\n",
            "a number 5,000 characters long",
        ),
    ],
    ids=["billion-laughs", "deep", "long-number"],
)
def test_verify_compose_refuses_a_bomb_a_deep_nest_and_a_long_number(
    text: str, problem: str, tmp_path: Path
) -> None:
    compose = tmp_path / "compose.yaml"
    compose.write_text(text)
    with sim_process("--itl-ms", "1") as url:
        result = _run(["verify", url, "--compose", str(compose)])
    _one_line(result, f"--compose {compose}: not a servelab YAML file: {problem}")


@pytest.mark.parametrize(
    "text, problem",
    [
        (CONFIG_LAUGHS, "more than 100,000 values once its aliases are expanded"),
        ("model: " + "[" * 10_000 + "]" * 10_000 + "\n", "nested over 100 deep"),
        (f"model: x\nconcurrency: [{LONG_NUMBER}]\n", "a number 5,000 characters long"),
    ],
    ids=["billion-laughs", "deep", "long-number"],
)
def test_bench_config_refuses_a_bomb_a_deep_nest_and_a_long_number(
    text: str, problem: str, tmp_path: Path
) -> None:
    config = tmp_path / "experiment.yaml"
    config.write_text(text)
    result = _run(["bench", "http://127.0.0.1:9", "--config", str(config), "--db", str(tmp_path / "r.db")])
    _one_line(result, f"--config {config}: not a servelab YAML file: {problem}")


@pytest.mark.parametrize(
    "text, problem",
    [
        (DEEP_JSON, "nested over 100 deep"),
        ('{"plans": [' + LONG_NUMBER + "]}", "a number 5,000 characters long"),
    ],
    ids=["deep", "long-number"],
)
@pytest.mark.parametrize("command", ["report", "predict"])
def test_plan_files_refuse_a_deep_nest_and_a_long_number(
    command: str, text: str, problem: str, tmp_path: Path
) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text(text)
    args = _commands(plan, tmp_path)[f"{command} --plan"]
    _one_line(_run(args), f"--plan {plan}: not a servelab JSON file: {problem}")


def test_yaml_anchors_and_merge_keys_of_an_ordinary_compose_file_still_load(tmp_path: Path) -> None:
    from servelab.verify.compose import load_service

    compose = tmp_path / "compose.yaml"
    compose.write_text(
        "x-common: &common\n  image: vllm/vllm-openai:v0.8.5\n  environment: {HF_HOME: /data}\n"
        "services:\n  vllm:\n    <<: *common\n    command: [--model, Qwen/Qwen3-8B, --max-model-len, '8192']\n"
    )
    service = load_service(compose)
    assert service.image == "vllm/vllm-openai:v0.8.5" and "--max-model-len" in service.argv


def test_a_config_value_of_the_wrong_kind_is_shown_cut_short(tmp_path: Path, capsys) -> None:
    from servelab.cli.app import main

    config = tmp_path / "experiment.yaml"
    config.write_text("model: [" + ", ".join(["lol"] * 50_000) + "]\n")
    assert main(["bench", "http://127.0.0.1:9", "--config", str(config), "--db", str(tmp_path / "r.db")]) == 2
    err = capsys.readouterr().err
    assert "model in" in err and "must be a string, got ['lol'" in err and len(err) < 400

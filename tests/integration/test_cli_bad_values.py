"""Bad values that gave tracebacks give one line (issue 26.4): a compressed-tensors config whose groups are a
list, a 128 KiB model path in --cmd, `model make -o FILE/x`, Ctrl-C while servelab starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from servelab.cli.app import main

CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 1000,
    "max_position_embeddings": 4096,
}


def _one_line(capsys, args: list[str]) -> str:
    code = main(args)
    err = capsys.readouterr().err
    assert code in (1, 2) and err.count("\n") == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize(
    "qc, words",
    [
        (
            {"quant_method": "compressed-tensors", "config_groups": [{"weights": {"num_bits": 4}}]},
            "config_groups must be an object of named groups, not list",
        ),
        (
            {"quant_method": "compressed-tensors", "config_groups": {"g": {"weights": {"num_bits": [4]}}}},
            "quantization_config holds a value of the wrong kind",
        ),
        ({"quant_method": "awq", "bits": {"x": 4}}, "quantization_config holds a value of the wrong kind"),
        (
            {"quant_method": "modelopt", "quantization": [1]},
            "quantization_config holds a value of the wrong kind",
        ),
    ],
    ids=["groups-list", "bits-list", "awq-bits-dict", "modelopt-list"],
)
def test_a_quantization_config_of_the_wrong_shape_is_one_line(qc, words, tmp_path: Path, capsys) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**CONFIG, "quantization_config": qc}))
    assert words in _one_line(capsys, ["plan", str(path), "--gpu", "rtx4090", "--engine", "vllm"])


@pytest.mark.parametrize(
    "command", ["llama-server -m /{long}.gguf", "vllm serve /{long}", "llama-server -m {deep}.gguf"]
)
def test_a_128_kib_model_path_in_cmd_is_one_line(command: str, capsys) -> None:
    cmd = command.format(long="a" * 131_072, deep="/a" * 65_536)
    err = _one_line(capsys, ["plan", "--cmd", cmd, "--gpu", "rtx4090"])
    assert "cannot look the path up (File name too long)" in err and len(err) < 400


def test_model_make_under_a_regular_file_is_one_line(tmp_path: Path, capsys) -> None:
    (tmp_path / "file").write_text("not a directory")
    for args in (
        ["dense", "-o", str(tmp_path / "file" / "x.gguf")],
        ["llama", "--format", "hf", "-o", str(tmp_path / "file" / "x")],
    ):
        assert "cannot write model to" in _one_line(capsys, ["model", "make", *args])
    assert (tmp_path / "file").read_text() == "not a directory"


# a real SIGINT at a fixed moment of start-up: when the last command module is being imported
INTERRUPTED_START = """
import os, signal, sys

class Interrupt:
    def find_spec(self, name, path=None, target=None):
        if name == "servelab.cli.demo":
            os.kill(os.getpid(), signal.SIGINT)
        return None

sys.meta_path.insert(0, Interrupt())
from servelab.cli.app import main
sys.exit(main(["plan", "--help"]))
"""


def test_ctrl_c_while_servelab_starts_exits_130_without_a_traceback() -> None:
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    result = subprocess.run(
        [sys.executable, "-c", INTERRUPTED_START], capture_output=True, text=True, timeout=120, env=env
    )
    assert result.returncode == 130 and result.stderr == "servelab: interrupted\n", result.stderr[-2000:]

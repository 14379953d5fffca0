"""`servelab serve` prints the address the engine really binds, read from its argv by its own reader."""

from __future__ import annotations

from pathlib import Path

import pytest

from servelab.cli.serve import bound_address, render
from servelab.engines import registry
from servelab.engines.llamacpp.launch import server_argv
from servelab.engines.sglang.launch import launch_argv as sglang_argv
from servelab.engines.vllm.launch import launch_argv as vllm_argv

ARGV = {
    "llamacpp": lambda args: server_argv(
        Path("/opt/llama-server"), Path("/m.gguf"), host="127.0.0.1", port=8080, args=args
    ),
    "sglang": lambda args: sglang_argv("org/model", host="127.0.0.1", port=8080, args=args),
    "vllm": lambda args: vllm_argv("org/model", host="127.0.0.1", port=8080, args=args),
}


@pytest.mark.parametrize("name", sorted(ARGV))
def test_servelabs_own_host_is_what_is_bound_without_engine_flags(name):
    engine = registry.get_engine(name)
    assert bound_address(engine, ARGV[name]([]), "127.0.0.1", 8080) == "127.0.0.1:8080"


@pytest.mark.parametrize("name", sorted(ARGV))
def test_a_host_after_the_double_dash_wins_and_says_every_interface(name):
    engine = registry.get_engine(name)
    argv = ARGV[name](["--host", "0.0.0.0", "--port", "9001"])
    assert bound_address(engine, argv, "127.0.0.1", 8080) == "0.0.0.0:9001 (every interface)"
    assert (
        bound_address(engine, ARGV[name](["--host", "::"]), "127.0.0.1", 8080)
        == "[::]:8080 (every interface)"
    )


def test_the_serving_line_names_the_bound_address(capsys):
    engine = registry.get_engine("llamacpp")
    bound = bound_address(engine, ARGV["llamacpp"](["--host", "0.0.0.0"]), "127.0.0.1", 8080)
    render(
        {
            "engine": "llama.cpp",
            "url": "http://127.0.0.1:8080",
            "bound": bound,
            "pid": 7,
            "log_path": "/l",
            "command": "llama-server …",
            "effective": {},
            "mismatches": [],
        }
    )
    first = capsys.readouterr().out.splitlines()[0]
    assert (
        first
        == "llama.cpp serving at http://127.0.0.1:8080, bound to 0.0.0.0:8080 (every interface) (pid 7, log /l)"
    )

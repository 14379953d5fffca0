"""verify's inputs that are not what they claim to be: one-line ConfigError (exit 2), never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from servelab.cli.app import main
from servelab.engines.http import HttpProbe
from servelab.errors import ConfigError
from servelab.verify.asked import from_command, from_plan, parse_expect
from servelab.verify.compose import from_compose

BINARY = bytes(range(256)) * 8  # not UTF-8


def test_a_port_out_of_range_is_a_usage_error_without_the_password(capsys) -> None:
    with pytest.raises(ConfigError, match="outside 1-65535"):
        HttpProbe("http://127.0.0.1:99999")
    assert main(["verify", "http://user:hunter2@127.0.0.1:99999"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "hunter2" not in err and "Traceback" not in err


def test_binary_plan_and_compose_files_are_named(tmp_path: Path) -> None:
    blob = tmp_path / "model.gguf"
    blob.write_bytes(BINARY)
    with pytest.raises(ConfigError, match=r"--plan .*not a JSON text file"):
        from_plan(blob)
    with pytest.raises(ConfigError, match=r"--compose .*not a YAML text file"):
        from_compose(blob)


def test_unclosed_quotes_in_a_command_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--cmd: cannot split the command line"):
        from_command("llama-server -c '")
    compose = tmp_path / "compose.yaml"
    compose.write_text(
        'services:\n  s:\n    image: ghcr.io/ggml-org/llama.cpp:server\n    command: "llama-server -c \'"\n'
    )
    with pytest.raises(ConfigError, match="compose service 's': cannot split"):
        from_compose(compose)


@pytest.mark.parametrize("item", ["context=0", "slots=-1", "tp_size=0", "max_total_tokens=-5"])
def test_expected_counts_must_be_positive(item: str) -> None:
    with pytest.raises(ConfigError, match="positive whole number"):
        parse_expect([item])


def test_an_unclosed_ipv6_bracket_is_a_usage_error(capsys) -> None:
    assert main(["verify", "http://[::1"]) == 2
    out, err = capsys.readouterr()
    assert (
        out == ""
        and err == "servelab: error: not a valid URL (Invalid IPv6 URL); use e.g. http://127.0.0.1:8080\n"
    )


def test_a_command_line_that_sets_nothing_checkable_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"'ls -la' does not launch a known engine"):
        from_command("ls -la", engine="llamacpp")
    with pytest.raises(ConfigError, match=r"'--temp 0.7' sets nothing verify can check for llamacpp"):
        from_command("--temp 0.7", engine="llamacpp")
    assert from_command("llama-server -c 8192 -np 4").values["context"] == 8192

"""`servelab serve`'s checks before an engine starts: bad --port, --host and --log are named for what they are."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest

from servelab.engines.process import ManagedProcess, check_port_free
from servelab.errors import ConfigError, EngineError


def test_a_port_in_use_is_still_called_in_use() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        with pytest.raises(EngineError, match="already in use"):
            check_port_free("127.0.0.1", sock.getsockname()[1])


@pytest.mark.parametrize(
    ("host", "port", "says"),
    [("127.0.0.1", 70000, "outside 1-65535"), ("no-such-host.invalid", 8080, "check --host")],
)
def test_a_bad_port_or_host_is_not_blamed_on_a_busy_port(host: str, port: int, says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        check_port_free(host, port)


def test_a_log_path_that_is_a_directory_is_not_blamed_on_the_binary(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=f"cannot write the engine log {tmp_path}"):
        ManagedProcess([sys.executable, "-c", "pass"], tmp_path).start()

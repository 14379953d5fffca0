"""`servelab sim` as a real process on loopback, for the bench tests: ``with sim_process("--itl-ms", "5") as url``."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import urllib.request
from collections.abc import Iterator


@contextlib.contextmanager
def sim_process(*args: str) -> Iterator[str]:
    """Start the sim on a free port (its own process and core), yield its URL, stop it."""
    cmd = [sys.executable, "-c", "import sys; from servelab.cli.app import main; sys.exit(main())"]
    proc = subprocess.Popen(
        [*cmd, "sim", "--port", "0", "--json", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"servelab sim did not start: {proc.stderr.read()}")
        yield json.loads(line)["url"]
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def sim_requests_seen(url: str) -> int:
    """How many generation requests the sim received (from its /metrics)."""
    with urllib.request.urlopen(url + "/metrics", timeout=5) as response:
        text = response.read().decode()
    return int(next(line.split()[1] for line in text.splitlines() if line.startswith("sim_requests_total")))

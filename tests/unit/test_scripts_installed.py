"""scripts/installed.py: `scripts/test` skips pip only when this tree's pyproject.toml was installed and every
requirement is present (a real run of the script against this environment, which the tests run in)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "installed.py"


def _run(*args: str) -> int:
    return subprocess.run(
        [sys.executable, "-I", str(SCRIPT), *args], capture_output=True, timeout=60
    ).returncode


def test_pip_is_skipped_only_after_a_stamp_of_this_pyproject(tmp_path: Path) -> None:
    stamp = tmp_path / "cache" / "install-stamp"
    assert _run(str(stamp), "test", "ray") == 1  # a clean clone: no stamp
    assert _run("--write", str(stamp)) == 0
    assert _run(str(stamp), "test", "ray") == 0
    assert _run(str(stamp), "no-such-extra") == 0  # an unknown extra adds no requirement
    stamp.write_text("another" + stamp.read_text())  # another pyproject.toml
    assert _run(str(stamp), "test", "ray") == 1
    assert _run() == 2

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


def _installed_here() -> bool:
    """servelab, as an isolated interpreter imports it, is this tree's (not a checkout elsewhere's)."""
    found = subprocess.run(
        [sys.executable, "-I", "-c", "import servelab; print(servelab.__file__)"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return found.returncode == 0 and Path(found.stdout.strip()).parent == SCRIPT.parents[1] / "servelab"


def test_pip_is_skipped_only_after_a_stamp_of_this_pyproject(tmp_path: Path) -> None:
    stamp = tmp_path / "cache" / "install-stamp"
    assert _run(str(stamp), "test", "ray") == 1  # a clean clone: no stamp
    assert _run("--write", str(stamp)) == 0
    fresh = 0 if _installed_here() else 1  # installed from another checkout (a git worktree): pip must run
    assert _run(str(stamp), "test", "ray") == fresh
    assert _run(str(stamp), "no-such-extra") == fresh  # an unknown extra adds no requirement
    stamp.write_text("another" + stamp.read_text())  # another pyproject.toml
    assert _run(str(stamp), "test", "ray") == 1
    assert _run() == 2

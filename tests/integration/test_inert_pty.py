"""A real `servelab` process attached to a real pty (os.openpty) writes nothing raw from a hostile run: no
ESC, BEL or OSC sequence of the payload reaches the terminal, only its visible escaped form (issue 14.5).

The terminal is dumb and NO_COLOR is set, so rich adds no styling escapes of its own: any ESC at all that
reaches the pty came from the payload. (rich takes a dumb terminal as 80 columns, so `runs` wraps the name
column: there the escaped pieces are checked, not the whole escaped name.)"""

from __future__ import annotations

import fcntl
import os
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from tests.integration.test_inert_output import HOSTILE
from tests.runs_factory import store_run

CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # all but \t and \n (the pty's \r\n is made \n first)
SERVELAB = [sys.executable, "-c", "import sys; from servelab.cli.app import main; sys.exit(main())"]


def _on_a_pty(argv: list[str]) -> tuple[int, str]:
    """Run servelab with stdin, stdout and stderr on one pty; everything written to it, and the exit code."""
    master, slave = os.openpty()
    fcntl.ioctl(
        slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 250, 0, 0)
    )  # rows, columns, as a terminal has
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "FORCE_COLOR")}
    env.update(NO_COLOR="1", TERM="dumb")
    proc = subprocess.Popen(
        [*SERVELAB, *argv], stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True
    )
    os.close(slave)
    chunks: list[bytes] = []
    try:
        while True:
            try:
                piece = os.read(master, 65536)
            except OSError:  # EIO: the child closed its end of the pty
                break
            if not piece:
                break
            chunks.append(piece)
    finally:
        os.close(master)
        code = proc.wait(timeout=60)
    return code, b"".join(chunks).decode("utf-8", errors="replace").replace("\r\n", "\n")


PIECES = ["\\x1b[31", "\\x1b]8;;", "\\x07", "[red"]


@pytest.mark.parametrize(("command", "shown"), [(["runs"], PIECES), (["report", "--terminal"], PIECES)])
def test_a_hostile_run_reaches_a_real_pty_inert(tmp_path: Path, command: list[str], shown: list[str]) -> None:
    db = tmp_path / "runs.db"
    store_run(db, name=HOSTILE + "\x00", model=HOSTILE + "\x00", failure="server said \x1b[5mboom\x07")
    code, written = _on_a_pty([*command, "--db", str(db)])
    assert code == 0 and "Traceback" not in written and "m\\x1b" in written
    assert "\x1b" not in written and "\x07" not in written and "\x9d" not in written  # no ESC, BEL, C1 OSC
    assert CONTROL.search(written) is None, CONTROL.findall(written)
    for visible in shown:  # the payload shown escaped, its markup literally
        assert visible in written, visible

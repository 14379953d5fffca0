"""`servelab bench`'s console, in a real servelab process against a real `servelab sim`: on a real pty
(os.openpty) stderr carries the live view (the level in flight, the bar over the run with its ETA, the
levels-done table that stays as the final table) while stdout, a pipe, carries only the JSON result; with
stderr a pipe it carries plain lines, one per level start and one per level end, without any escape."""

from __future__ import annotations

import fcntl
import json
import os
import re
import struct
import subprocess
import termios
from pathlib import Path

from servelab.bench.live import RunningMedian
from tests.bench_sim import sim_process
from tests.integration.test_inert_pty import SERVELAB

ARGS = ("--concurrency", "1,2", "--requests", "6", "--output-tokens", "48", "--input-tokens", "8")
SLOW = ("--ttft-ms", "20", "--itl-ms", "12")  # ~0.6 s a request: the view refreshes (2 Hz) during each level


def _bench_on_a_pty(url: str, db: Path) -> tuple[int, str, str]:
    return _read_pty_child([*SERVELAB, "bench", url, *ARGS, "--db", str(db), "--json"])


def _read_pty_child(argv: list[str]) -> tuple[int, str, str]:
    """Run `argv` with stdin and stderr on a real 200-column pty and stdout a pipe: (exit code, stdout, screen)."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "FORCE_COLOR", "NO_COLOR")}
    env["TERM"] = "xterm-256color"
    proc = subprocess.Popen(argv, stdin=slave, stdout=subprocess.PIPE, stderr=slave, env=env, close_fds=True)
    os.close(slave)
    chunks: list[bytes] = []
    while True:
        try:
            piece = os.read(master, 65536)
        except OSError:  # EIO: the child closed its end
            break
        if not piece:
            break
        chunks.append(piece)
    os.close(master)
    stdout = proc.stdout.read().decode() if proc.stdout else ""
    return proc.wait(timeout=60), stdout, b"".join(chunks).decode("utf-8", errors="replace")


def test_on_a_terminal_stderr_shows_the_level_in_flight_and_stdout_only_the_result(tmp_path: Path) -> None:
    with sim_process(*SLOW) as url:
        code, stdout, screen = _bench_on_a_pty(url, tmp_path / "r.db")
    assert code == 0
    result = json.loads(stdout)  # nothing but the result on stdout
    assert [lv["level"] for lv in result["targets"][0]["levels"]] == ["c=1", "c=2"]
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen)
    # the level in flight, refreshed while it ran: requests done of planned, tok/s, TTFT/ITL so far, errors, client
    assert re.search(
        r"c=2 repeat 0: \d/8 requests, [\d,.]+ tok/s, TTFT p50 [\d.—]+ ms, ITL p50 [\d.—]+ ms so far", plain
    )
    assert "errors: none" in plain and "client lag p99" in plain
    assert re.search(
        r"level 2/2 .*\d+% · \d+:\d\d elapsed · ETA \d+:\d\d", plain
    )  # the bar over the whole run
    final = plain[plain.rindex("levels done") :]  # the last frame stays: the final table
    assert re.search(r"1 │ http://127\.0\.0\.1:\d+ │ c=1 +│ +6 │ +0 │", final)
    assert re.search(r"2 │ http://127\.0\.0\.1:\d+ │ c=2 +│ +6 │ +0 │", final) and "repeat 0:" not in final
    assert "\x1b[2K\x1b[1A" in screen  # drawn in place (rich Live), not scrolled line by line


def test_with_stderr_a_pipe_each_level_is_two_plain_lines(tmp_path: Path) -> None:
    with sim_process("--ttft-ms", "5", "--itl-ms", "2") as url:
        done = subprocess.run(
            [*SERVELAB, "bench", url, *ARGS, "--db", str(tmp_path / "r.db")],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert done.returncode == 0 and "\x1b" not in done.stderr
    lines = done.stderr.splitlines()
    assert lines[0] == f"[1/2] {url} c=1 repeat 0…" and lines[2] == f"[2/2] {url} c=2 repeat 0…"
    for line, level in ((lines[1], "c=1"), (lines[3], "c=2")):
        assert re.fullmatch(
            rf"\[\d/2\] {re.escape(url)} {level}: 6 ok, 0 errors, [\d,.]+ tok/s, TTFT p50 [\d.]+ ms, "
            r"ITL p50 [\d.]+ ms, (valid|NOT valid: .+)",
            line,
        ), line
    assert (
        "[1/2]" not in done.stdout and "c=2" in done.stdout and "complete" in done.stdout
    )  # the result table


def test_the_running_median_is_the_median() -> None:
    median = RunningMedian()
    seen: list[float] = []
    for value in (5.0, 1.0, 9.0, 3.0, 3.0, 8.0, 2.0):
        median.add(value)
        seen.append(value)
        ordered = sorted(seen)
        mid = len(ordered) // 2
        assert median.value == (ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2)

"""`servelab predict`'s console, in a real servelab process, through the bench's own view (cli/live_view.py):
on a real pty (os.openpty) stderr carries each predicted level as it is computed (its figures, the bar over
the ladder with its ETA, marked predicted) and the levels-done table that stays as the final table, while
stdout, a pipe, carries only the JSON result; with stderr a pipe it carries one plain line a level, no escape."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from tests.integration.test_bench_console import _read_pty_child
from tests.integration.test_inert_pty import SERVELAB

PLAN = ("Qwen/Qwen3-8B", "--gpu", "rtx4090", "--engine", "vllm", "--quant", "bf16", "--context", "8192")
ARGS = ("--concurrency", "1,4", "--requests", "8", "--output-tokens", "32", "--input-tokens", "16")
URL = re.escape("predict://vllm/rtx4090")


def test_on_a_terminal_stderr_shows_each_predicted_level_and_stdout_only_the_result(tmp_path: Path) -> None:
    argv = [*SERVELAB, "predict", *PLAN, *ARGS, "--db", str(tmp_path / "r.db"), "--json"]
    code, stdout, screen = _read_pty_child(argv)
    assert code == 0
    result = json.loads(stdout)  # nothing but the result on stdout
    levels = result["targets"][0]["levels"]
    assert [lv["level"] for lv in levels] == ["c=1", "c=4"]
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen)
    # each level drawn as it was predicted: requests done/total, tok/s, TTFT/ITL p50, errors, marked predicted
    for level in ("c=1", "c=4"):
        assert re.search(
            rf"{URL} {level} repeat 0 predicted: 8/8 requests, [\d,.]+ tok/s, TTFT p50 [\d.]+ ms, "
            r"ITL p50 [\d.]+ ms",
            plain,
        ), level
    assert "errors: none · virtual time" in plain
    assert re.search(r"predicted level 1/2 .*50% · \d+:\d\d elapsed · ETA \d+:\d\d", plain)  # the bar
    assert re.search(r"predicted level 2/2 .*100% · \d+:\d\d elapsed · ETA 0:00", plain)
    final = plain[plain.rindex("levels done") :]  # the last frame stays: the final table alone
    assert final.startswith("levels done (predicted, virtual time)")
    for n, level in ((1, "c=1"), (2, "c=4")):
        tok_s = f"{levels[n - 1]['output_tok_s']:,.1f}"
        assert re.search(rf"{n} │ {URL} │ {level} +│ +8 │ +0 │ +{re.escape(tok_s)} │.*│ predicted", final)
    assert "repeat 0 predicted:" not in final
    assert "\x1b[2K\x1b[1A" in screen  # drawn in place (rich Live), not scrolled line by line


def test_with_stderr_a_pipe_each_predicted_level_is_one_plain_line(tmp_path: Path) -> None:
    done = subprocess.run(
        [*SERVELAB, "predict", *PLAN, *ARGS, "--no-store"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0 and "\x1b" not in done.stderr
    lines = done.stderr.splitlines()
    assert lines[0].startswith("predicting vllm bf16 on 1 x rtx4090") and len(lines) == 3
    for line, n, level in ((lines[1], 1, "c=1"), (lines[2], 2, "c=4")):
        assert re.fullmatch(
            rf"\[{n}/2\] {URL} {level}: 8 ok, 0 errors, [\d,.]+ tok/s, TTFT p50 [\d.]+ ms, "
            r"ITL p50 [\d.]+ ms, predicted \(virtual time\)",
            line,
        ), line
    assert "[1/2]" not in done.stdout and "c=4" in done.stdout  # the result table, on stdout only

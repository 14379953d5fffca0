"""`servelab spec` refuses nonsense numbers with one line (a huge --draft-tokens once allocated gigabytes)."""

from __future__ import annotations

import pytest

from servelab.cli.app import main


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--draft-tokens", "1000000000"],
            "--draft-tokens must be a whole number from 1 to 256 tokens per step",
        ),
        (
            ["--draft-tokens", "0"],
            "--draft-tokens must be a whole number from 1 to 256 tokens per step, got 0",
        ),
        (["--draft-tokens", "4", "--draft-cost", "nan"], "--draft-cost must be a number from 0 to 10"),
        (
            ["--draft-tokens", "4", "--baseline-tok-s", "0", "--spec-tok-s", "5"],
            "--baseline-tok-s must be a number above 0",
        ),
        (
            ["--draft-tokens", "4", "--baseline-tok-s", "5", "--spec-tok-s", "inf"],
            "--spec-tok-s must be a number above 0",
        ),
    ],
)
def test_nonsense_numbers_are_one_line(capsys, args, message) -> None:
    assert main(["spec", "--accept-length", "2", *args]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.splitlines()) == 1
    assert captured.err.startswith(f"servelab: error: {message}")


def test_a_sensible_draft_length_still_gives_a_verdict(capsys) -> None:
    assert main(["spec", "--accept-length", "2", "--draft-tokens", "4", "--json"]) == 0
    assert '"verdict"' in capsys.readouterr().out

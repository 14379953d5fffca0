"""The CLI's usage errors: one line on stderr, exit 2, no traceback, whatever click typer ships."""

from __future__ import annotations

import pytest

from servelab.cli.app import main


@pytest.mark.parametrize(
    ("argv", "names"),
    [
        (["plan"], "model"),
        (["plan", "Qwen/Qwen3-8B", "--bogus"], "--bogus"),
        (["plan", "Qwen/Qwen3-8B", "--context", "1e9"], "--context"),
        (["spec", "--accept-rate", "0.5", "--draft-tokens", "four"], "--draft-tokens"),
        (["no-such-command"], "no-such-command"),
        (["engine", "install"], "engine"),
    ],
)
def test_usage_errors_are_one_line_with_exit_2(argv, names, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    assert err.startswith("servelab: error: ") and names in err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"`servelab {argv[0]}" in err or "`servelab --help`" in err


def test_no_arguments_shows_the_help_on_stderr(capsys):
    code = main([])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert "Commands:" in err and "plan" in err

"""The ladder table bench prints: every figure whole at 80 columns and when piped, and why a level is not valid."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from servelab.cli.bench import _render
from servelab.results.level_key import Level
from servelab.results.stats import Distribution, LevelStats, LevelSummary


def _level(level: str, tok_s: float, valid: bool = True, reason: str | None = None) -> LevelSummary:
    stats = LevelStats(
        level=Level.parse(level),
        per_stream_tok_s=Distribution(p50=99.95),
        output_tok_s=tok_s,
        ttft_ms=Distribution(p50=1234.5, p99=98765.4),
        itl_ms=Distribution(p50=10.04, p99=11.96),
        errors=12,
        evictions=3,
    )
    return LevelSummary(stats, valid=valid, invalid_reason=reason)


RESULT = SimpleNamespace(
    run_id="r1",
    partial=False,
    targets=[
        SimpleNamespace(
            url="http://127.0.0.1:8080",
            engine="llamacpp",
            model="m",
            max_rate=None,
            levels=[
                _level("c=1", 96.7),
                _level("c=16", 123456.7, valid=False, reason="client used 95% of a core"),
            ],
        )
    ],
)


@pytest.mark.parametrize("columns", [None, "80"])
def test_every_figure_is_whole_and_an_invalid_level_says_why(monkeypatch, capsys, columns) -> None:
    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)  # piped (pytest captures stdout): full width
    else:
        monkeypatch.setenv("COLUMNS", columns)
    _render(RESULT, json_out=False)
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= (80 if columns else 200)
    for figure in ("96.7", "123456.7", "1234.5", "98765.4", "10.0", "12.0", "100.0", "12", "3", "NO", "yes"):
        assert figure in out, figure
    assert "c=16 not valid: client used 95% of a core" in out
    assert "…" not in out

"""docs/results-schema.md names every key of a bench level and of a distribution, as the code writes them."""

from __future__ import annotations

from pathlib import Path

from servelab.results.level_key import Level
from servelab.results.stats import LEVEL_KEYS, Distribution, LevelStats, LevelSummary

DOC = (Path(__file__).resolve().parents[2] / "docs" / "results-schema.md").read_text()


def test_every_bench_level_key_is_documented_once_spelt() -> None:
    assert [k for k in LEVEL_KEYS if f"`{k}`" not in DOC] == []
    assert "why_invalid" not in DOC


def test_a_level_written_and_read_back_is_the_same_value() -> None:
    stats = LevelStats(
        level=Level.open(2.5),
        completed=3,
        ttft_ms=Distribution.of([1.0, 2.0, 4.0]),
        lateness_ms=Distribution.of([0.1]),
        ci95={"output_tok_s": (10.0, 1.5), "request_s": None},
    )
    assert LevelStats.from_json(stats.to_json()) == stats
    assert set(LevelSummary(stats).to_json()) <= set(LEVEL_KEYS)
    assert list(Distribution().to_json()) == [
        "p50",
        "p90",
        "p95",
        "p99",
        "p99_9",
        "mean",
        "std",
        "min",
        "max",
        "n",
    ]
    assert all(f'"{k}"' in DOC for k in Distribution().to_json())


def test_levels_read_and_write_their_text_form_only_at_the_edge() -> None:
    assert Level.parse("c=4") == Level.closed(4) and Level.closed(4).label == "c=4"
    assert Level.parse("r=2.5").rate_rps == 2.5 and Level.open(2.5).label == "r=2.5"
    for bad in ("c=0", "c=1.5", "x=1", "r=-1", "r=nan", "4"):
        try:
            Level.parse(bad)
        except ValueError:
            continue
        raise AssertionError(f"{bad!r} parsed")
    assert sorted([Level.open(1.0), Level.closed(8), Level.closed(2)], key=lambda lv: lv.sort_key) == [
        Level.closed(2),
        Level.closed(8),
        Level.open(1.0),
    ]

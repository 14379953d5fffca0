"""servelab/userfiles.py: the one reader of files a user names (issue 26.1)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from servelab.errors import ConfigError, ModelFormatError
from servelab.userfiles import MAX_DEPTH, UserFile


def test_a_fifo_a_directory_and_an_oversized_file_are_refused_without_reading(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(
        ConfigError, match=r"^--x .*pipe: not a regular file \(a FIFO, device or socket\); h$"
    ):
        UserFile.named(fifo, "--x", "h").read_bytes(10)
    with pytest.raises(ConfigError, match="is a directory, not a file"):
        UserFile.named(tmp_path, "--x").open()
    big = tmp_path / "big"
    big.write_bytes(b"x" * 11)
    with pytest.raises(ModelFormatError, match="11 bytes; such a file is at most 10"):
        UserFile(big, "big", error=ModelFormatError).read_bytes(10)
    assert UserFile(big, "big").read_bytes(11) == b"x" * 11


def test_yaml_aliases_within_bounds_load_and_a_cycle_or_a_deep_expansion_does_not(tmp_path: Path) -> None:
    source = UserFile(tmp_path / "c.yaml", "c.yaml")
    assert source.parse_yaml("a: &a {x: 1}\nb: {<<: *a, y: 2}\nc: [*a, *a]\n") == {
        "a": {"x": 1},
        "b": {"x": 1, "y": 2},
        "c": [{"x": 1}, {"x": 1}],
    }
    with pytest.raises(ConfigError, match="a cycle"):
        source.parse_yaml("a: &a [1, *a]\n")
    chain = "a0: &a0 " + "[" * 60 + "]" * 60 + "\n" + "a1: &a1 " + "[" * 59 + "*a0" + "]" * 59 + "\n"
    with pytest.raises(ConfigError, match=f"nested over {MAX_DEPTH} deep once its aliases are expanded"):
        source.parse_yaml(chain)


def test_json_within_limits_keeps_its_numbers(tmp_path: Path) -> None:
    source = UserFile(tmp_path / "p.json", "p.json")
    assert source.parse_json('{"a": [1.5, 12345678901234567890, -3e-5, null]}') == {
        "a": [1.5, 12345678901234567890, -3e-5, None]
    }
    nested = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert source.parse_json(nested) is not None
    with pytest.raises(ConfigError, match="nested over"):
        source.parse_json("[" + nested + "]")

"""Workload files (JSONL / ShareGPT JSON) read through the one safe reader: hostile JSON is one line (issue 26.1)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servelab.bench.workload_files import load_file_prompts
from servelab.errors import ConfigError


@pytest.mark.parametrize(
    "text, problem",
    [
        (
            '{"prompt": "hi"}\n{"prompt": ' + "[" * 10_000 + "]" * 10_000 + "}\n",
            "line 2: not a servelab JSON file: nested",
        ),
        (
            '{"prompt": "hi", "max_tokens": ' + "9" * 5000 + "}\n",
            "line 1: not a servelab JSON file: a number 5,000",
        ),
        ("[" * 10_000 + "]" * 10_000, "not a servelab JSON file: nested over 100 deep"),
        ('{"prompt": "hi"}\n{oops\n', "line 2: not JSON"),
    ],
    ids=["deep-line", "long-number", "deep-array", "bad-line"],
)
def test_hostile_workload_files_are_one_line_errors(text: str, problem: str, tmp_path: Path) -> None:
    path = tmp_path / "w.jsonl"
    path.write_text(text)
    with pytest.raises(ConfigError, match=f"^--workload {path}: {problem}"):
        load_file_prompts(path, 2, 16, chat=True)


def test_a_workload_file_still_reads_jsonl_and_sharegpt(tmp_path: Path) -> None:
    jsonl = tmp_path / "w.jsonl"
    jsonl.write_text(
        '{"prompt": "one", "max_tokens": 7}\n\n{"messages": [{"role": "user", "content": "two"}]}\n'
    )
    prompts = load_file_prompts(jsonl, 3, 16, chat=False)
    assert [(p.text, p.output_tokens) for p in prompts] == [("one", 7), ("two", 16), ("one", 7)]
    share = tmp_path / "s.json"
    share.write_text(json.dumps([{"conversations": [{"from": "human", "value": "hello"}]}]))
    assert load_file_prompts(share, 1, 16, chat=True)[0].messages == ({"role": "user", "content": "hello"},)

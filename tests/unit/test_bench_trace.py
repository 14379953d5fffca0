"""Trace files (bench/trace.py): the three layouts, --trace-speed, cuts, hostile rows, shared prefixes."""

from __future__ import annotations

import json

import pytest

from servelab.bench.trace import MAX_LINE_BYTES, load_trace
from servelab.bench.workloads import WorkloadSpec, build_trace_prompts
from servelab.errors import ConfigError

MOONCAKE = [  # the layout of kvcache-ai/Mooncake FAST25-release/traces (docs/reference/traces.md §1)
    {"timestamp": 1000, "input_length": 600, "output_length": 3, "hash_ids": [0, 1]},
    {"timestamp": 1000, "input_length": 700, "output_length": 5, "hash_ids": [0, 2]},
    {"timestamp": 1150, "input_length": 40, "output_length": 2, "hash_ids": [3]},
    {"timestamp": 1400, "input_length": 1100, "output_length": 4, "hash_ids": [0, 1, 4]},
]
AZURE = """TIMESTAMP,ContextTokens,GeneratedTokens
2023-11-16 18:17:03.9799600,4808,10
2023-11-16 18:17:04.0319600,3180,8
2023-11-16 18:17:04.0781490,110,27
"""  # the first rows of Azure/AzurePublicDataset data/AzureLLMInferenceTrace_code.csv (§2)


def _jsonl(tmp_path, rows, name="t.jsonl"):
    path = tmp_path / name
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def test_mooncake_rows_keep_their_lengths_ids_and_times_from_the_first(tmp_path):
    trace = load_trace(_jsonl(tmp_path, MOONCAKE))
    assert trace.layout == "mooncake" and trace.offsets_ns() == [0, 0, 150_000_000, 400_000_000]
    assert [(r.input_tokens, r.output_tokens, r.hash_ids) for r in trace.requests][3] == (1100, 4, (0, 1, 4))
    assert trace.mean_rate_rps == 10.0  # 4 requests over 0.4 s


def test_azure_csv_and_speed(tmp_path):
    path = tmp_path / "a.csv"
    path.write_text(AZURE)
    trace = load_trace(path, speed=2.0)
    assert trace.layout == "azure"
    assert trace.offsets_ns() == [0, 26_000_000, 49_094_500]  # µs-resolution datetimes, halved
    assert [(r.input_tokens, r.output_tokens) for r in trace.requests] == [(4808, 10), (3180, 8), (110, 27)]


def test_servelab_jsonl_and_the_cuts(tmp_path):
    rows = [{"at_ms": 10 * i, "input_tokens": 5 + i, "output_tokens": 2} for i in range(10)]
    path = _jsonl(tmp_path, rows)
    assert load_trace(path).layout == "servelab"
    assert len(load_trace(path, max_rows=3).requests) == 3
    assert load_trace(path, max_seconds=0.045).offsets_ns()[-1] == 40_000_000


@pytest.mark.parametrize(
    ("lines", "words"),
    [
        (['{"timestamp": 0, "input_length": 5, "output_length": 2}', "{oops"], "line 2: not JSON"),
        (
            ['{"timestamp": 0, "input_length": 5, "output_length": 0}'],
            "line 1: output_length must be a whole",
        ),
        (
            [
                '{"timestamp": 5, "input_length": 5, "output_length": 1}',
                "",
                '{"timestamp": 4, "input_length": 5, "output_length": 1}',
            ],
            "line 3: goes back in time",
        ),
        (['{"timestamp": -1, "input_length": 5, "output_length": 1}'], "line 1: timestamp must be a number"),
        (
            ['{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": [1, 2]}'],
            "line 1: 2 hash_ids",
        ),
        (
            ['{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": ["a"]}'],
            "line 1: hash_ids must",
        ),
        (
            ['{"timestamp": 0, "input_length": ' + "9" * 5000 + ', "output_length": 1}'],
            "line 1: not a servelab JSON file: a number 5,000",
        ),
        (["[1, 2]"], "line 1: not a trace"),
        (["TIMESTAMP,ContextTokens,GeneratedTokens", "yesterday,5,5"], "line 2: TIMESTAMP 'yesterday'"),
        (["TIMESTAMP,ContextTokens,GeneratedTokens", "2023-11-16 18:17:03,5"], "line 2: expected 3 columns"),
        (
            ["TIMESTAMP,ContextTokens,GeneratedTokens", "2023-11-16 18:17:03,5,x"],
            "line 2: GeneratedTokens must",
        ),
        (["a,b,c"], "line 1: not a trace: JSONL rows or a CSV header"),
        (['{"input_tokens": 1}'], "line 1: at_ms must be a number"),
    ],
)
def test_a_bad_row_is_one_line_naming_it(tmp_path, lines, words):
    with pytest.raises(ConfigError) as caught:
        load_trace(_jsonl(tmp_path, lines))
    message = str(caught.value)
    assert words in message and "\n" not in message and message.startswith(f"--trace {tmp_path}")


def test_hostile_files_are_refused_without_reading_them_whole(tmp_path):
    long = tmp_path / "long.jsonl"
    long.write_bytes(
        b'{"timestamp": 0, "input_length": 5, "output_length": 1}\n' + b"x" * (3 * MAX_LINE_BYTES)
    )
    with pytest.raises(ConfigError, match="line 2: longer than 1024 KiB"):
        load_trace(long)
    binary = tmp_path / "b.jsonl"
    binary.write_bytes(b"\xff\xfe\x00\x01\n")
    with pytest.raises(ConfigError, match="line 1: not UTF-8"):
        load_trace(binary)
    empty = tmp_path / "e.jsonl"
    empty.write_text("\n\n")
    with pytest.raises(ConfigError, match="has no requests"):
        load_trace(empty)
    with pytest.raises(ConfigError, match=r"missing\.jsonl: no such file"):
        load_trace(tmp_path / "missing.jsonl")
    with pytest.raises(ConfigError, match="--trace-speed"):
        load_trace(empty, speed=0)


def test_prompts_have_the_traced_lengths_and_share_the_text_of_shared_hash_ids(tmp_path):
    trace = load_trace(_jsonl(tmp_path, MOONCAKE))
    prompts = build_trace_prompts(WorkloadSpec("short", chat=False), trace.requests, None)
    words = [p.text.split() for p in prompts]
    assert [len(w) for w in words] == [600, 700, 40, 1100]  # no tokenizer: a word stands for a token
    assert [p.output_tokens for p in prompts] == [3, 5, 2, 4]
    block0 = words[0][:512]
    assert words[1][:512] == block0 and words[3][:512] == block0  # hash id 0, a full block in each
    assert words[3][512:1024] != words[1][512:1024]  # id 1 vs id 2 (row 1's 2nd block is partial: its own)
    assert words[2][:40] != block0[:40]  # id 3 only, a partial block: its own words
    again = build_trace_prompts(WorkloadSpec("short", chat=False), trace.requests, None)
    assert [p.text for p in again] == [p.text for p in prompts]  # seeded

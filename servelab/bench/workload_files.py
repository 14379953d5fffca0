"""User workloads from local files: JSONL (one {"prompt"} or {"messages"} per line, optional
"max_tokens"/"output_tokens") or ShareGPT JSON ({"conversations": [{"from": "human", "value": ...}]}).
Read in file order, cycled when the run needs more prompts than the file has. Never downloaded."""

from __future__ import annotations

from pathlib import Path

from servelab.errors import ConfigError
from servelab.results.records import MAX_TOKENS
from servelab.userfiles import UserFile

MAX_WORKLOAD_BYTES = 1 << 30  # ShareGPT V3 (unfiltered, cleaned) is about 640 MB


def load_file_prompts(path: Path, count: int, default_output: int, chat: bool) -> list:
    from servelab.bench.workloads import Prompt

    entries = _read_entries(path)
    if not entries:
        raise ConfigError(f'workload file {path} has no usable prompts (JSONL with "prompt" or "messages")')
    prompts = []
    for i in range(count):
        messages, output = entries[i % len(entries)]
        out = output or default_output
        if chat:
            prompts.append(Prompt(index=i, output_tokens=out, messages=tuple(messages)))
        else:
            prompts.append(
                Prompt(
                    index=i, output_tokens=out, text="\n".join(str(m.get("content", "")) for m in messages)
                )
            )
    return prompts


def _read_entries(path: Path) -> list[tuple[list[dict], int | None]]:
    source = UserFile.named(path, "--workload", "give JSONL or ShareGPT JSON")
    text = source.read_text(MAX_WORKLOAD_BYTES, "JSON")
    if text.lstrip().startswith("["):
        rows = source.parse_json(text)
    else:
        rows = [
            source.parse_json(line, f"line {n}: ")
            for n, line in enumerate(text.splitlines(), 1)
            if line.strip()
        ]
    return [
        entry for entry in (_entry(path, row) for row in rows if isinstance(row, dict)) if entry is not None
    ]


def _entry(path: Path, row: dict) -> tuple[list[dict], int | None] | None:
    output = row.get("output_tokens") or row.get("max_tokens")
    if (
        isinstance(output, int) and not isinstance(output, bool) and output > MAX_TOKENS
    ):  # no server, no store
        raise ConfigError(
            f"workload file {path}: max_tokens {str(output)[:40]} is over {MAX_TOKENS}; ask for fewer"
        )
    output = output if type(output) is int and output > 0 else None  # not a bool
    if isinstance(row.get("messages"), list):
        return [m for m in row["messages"] if isinstance(m, dict)], output
    if isinstance(row.get("prompt"), str):
        return [{"role": "user", "content": row["prompt"]}], output
    turns = row.get("conversations")
    if isinstance(turns, list):
        human = next(
            (t.get("value") for t in turns if isinstance(t, dict) and t.get("from") == "human"), None
        )
        if isinstance(human, str):
            return [{"role": "user", "content": human}], output
    return None

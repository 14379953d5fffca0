"""Benchmark prompts with exact token lengths, deterministic from a seed, identical for every target.

Text is built from a fixed word list (seeded), then measured with the TARGET's own tokenizer (/tokenize,
the chat template included when the server can apply it) and corrected word by word until the count is
exact; where the server accepts token ids (/v1/completions on llama.cpp, vLLM, sglang), the same text is
tokenized and cut to exactly N ids. Without a tokenizer the word count stands in, marked unverified.
Presets: short, long (capped by the server's context), mixed (1 long for every 3 short: slot eviction and
head-of-line blocking), shared-prefix (3/4 of the prompt shared per group of 4: cache hit vs miss),
multi-turn (conversations of 4 turns, each turn resending the history), or a local JSONL/ShareGPT file.
A trace (bench/trace.py) gives each prompt its length instead; its Mooncake hash_ids become shared text.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from servelab.bench.workload_files import load_file_prompts
from servelab.errors import ConfigError
from servelab.ranges import count

PRESETS = ("short", "long", "mixed", "shared-prefix", "multi-turn")
DEFAULT_LENGTHS = {"short": (128, 128), "long": (4096, 128)}
CONTEXT_MARGIN_TOKENS = 16
MAX_INPUT_TOKENS = 10_000_000  # the longest contexts served today, with room
MAX_OUTPUT_TOKENS = 1_000_000
TURNS = 4
PREFIX_GROUP = 4
TRACE_BLOCK_TOKENS = (
    512  # a Mooncake hash id stands for a block of this many tokens (docs/reference/traces.md §1)
)
_WORDS = [
    "time",
    "person",
    "year",
    "way",
    "day",
    "thing",
    "man",
    "world",
    "life",
    "hand",
    "part",
    "child",
    "eye",
    "woman",
    "place",
    "work",
    "week",
    "case",
    "point",
    "number",
    "group",
    "problem",
    "fact",
    "river",
    "stone",
    "light",
    "music",
    "garden",
    "window",
    "letter",
    "market",
    "story",
    "table",
    "paper",
    "water",
    "city",
    "mountain",
    "voice",
    "morning",
    "answer",
    "question",
    "system",
    "program",
    "country",
    "family",
    "school",
    "history",
    "money",
    "night",
    "power",
    "court",
    "village",
    "road",
    "field",
    "ocean",
    "island",
    "forest",
    "winter",
    "summer",
    "bridge",
    "train",
    "engine",
]


class TracedLength(Protocol):
    """One trace row's shape (bench/trace.py `TraceRequest`)."""

    @property
    def input_tokens(self) -> int: ...
    @property
    def output_tokens(self) -> int: ...
    @property
    def hash_ids(self) -> tuple[int, ...]: ...


class Tokenizer(Protocol):
    def ids(self, text: str) -> list[int] | None: ...
    def count_chat(self, messages: list[dict]) -> int | None: ...


@dataclass(frozen=True, kw_only=True)
class Prompt:
    index: int
    output_tokens: int
    text: str | None = None  # completions
    token_ids: tuple[int, ...] | None = None  # completions, exact
    messages: tuple[dict, ...] | None = None  # chat
    input_tokens: int | None = None  # achieved length as measured; None when it could not be measured
    verified: bool = False  # input_tokens comes from the server's tokenizer
    expected_cached_tokens: int = 0  # prefix a previous request should have left in the cache

    def body(self) -> dict:
        """The prompt part of a request body."""
        if self.messages is not None:
            return {"messages": list(self.messages)}
        return {"prompt": list(self.token_ids) if self.token_ids is not None else self.text}


@dataclass(frozen=True)
class WorkloadSpec:
    kind: str = "short"  # a preset or a file path
    input_tokens: int | None = None
    output_tokens: int | None = None
    seed: int = 0
    chat: bool = True
    use_token_ids: bool = False  # completions only, and only where the engine accepts ids

    def __post_init__(self) -> None:
        if self.input_tokens is not None:
            count(self.input_tokens, "--input-tokens", 1, MAX_INPUT_TOKENS, "tokens")
        if self.output_tokens is not None:
            count(self.output_tokens, "--output-tokens", 1, MAX_OUTPUT_TOKENS, "tokens")
        if self.kind not in PRESETS and not Path(self.kind).is_file():
            raise ConfigError(
                f"unknown workload {self.kind!r}; choose one of {', '.join(PRESETS)} or a JSONL file"
            )

    def lengths(self, kind: str) -> tuple[int, int]:
        default_in, default_out = DEFAULT_LENGTHS[kind]
        if kind == "short" or self.kind == kind:
            return self.input_tokens or default_in, self.output_tokens or default_out
        return default_in, self.output_tokens or default_out


def build_prompts(
    spec: WorkloadSpec, count: int, tokenizer: Tokenizer | None, context: int | None
) -> list[Prompt]:
    """Prompts 0..count-1 of the workload, exact where a tokenizer is available."""
    check_fits(spec, context)
    if spec.kind not in PRESETS:
        return load_file_prompts(Path(spec.kind), count, spec.output_tokens or 128, spec.chat)
    builder = _Builder(spec, tokenizer, context)
    return [builder.prompt(i) for i in range(count)]


def build_trace_prompts(
    spec: WorkloadSpec, rows: Sequence[TracedLength], tokenizer: Tokenizer | None
) -> list[Prompt]:
    """Prompt i shaped like ``rows[i]``: its input and output lengths (exact where a tokenizer is
    available), the text of its full hash-id blocks shared with every row that has the same ids."""
    builder = _Builder(spec, tokenizer, None)
    made: dict[int, Prompt] = {}
    out = []
    for i, row in enumerate(rows):
        key = id(row)
        if key not in made:
            made[key] = builder.traced(i, row)
        out.append(replace(made[key], index=i))
    return out


def check_fits(spec: WorkloadSpec, context: int | None) -> None:
    """ConfigError when an explicitly asked length cannot fit the server's verified context."""
    if context is None or spec.input_tokens is None:
        return
    out = spec.output_tokens or 128
    if spec.input_tokens + out > context:
        raise ConfigError(
            f"workload needs {spec.input_tokens} + {out} tokens but the server's context is {context}; "
            f"lower --input-tokens/--output-tokens or raise the server's context"
        )


class _Builder:
    def __init__(self, spec: WorkloadSpec, tokenizer: Tokenizer | None, context: int | None) -> None:
        self.spec, self.tokenizer, self.context = spec, tokenizer, context
        self._tokens_per_word: float | None = None
        self._blocks: dict[int, list[str]] = {}

    def prompt(self, i: int) -> Prompt:
        kind = self.spec.kind
        if kind == "mixed":
            return self._single(i, "long" if i % 4 == 3 else "short")
        if kind == "shared-prefix":
            return self._shared_prefix(i)
        if kind == "multi-turn":
            return self._turn(i)
        return self._single(i, kind)

    def traced(self, i: int, row: TracedLength) -> Prompt:
        """The row's lengths; each full block of its hash ids is that id's own text (so rows sharing leading
        ids share that prefix), the rest words of this prompt's own."""
        n_in = row.input_tokens
        full_blocks = row.hash_ids[: max(0, -(-n_in // TRACE_BLOCK_TOKENS) - 1)]
        fixed = [word for block in full_blocks for word in self._block(block)]
        return self._exact(i, row.output_tokens, fixed, _words(self.spec.seed + 7933, i, n_in * 2), n_in, 0)

    def _block(self, hash_id: int) -> list[str]:
        if hash_id not in self._blocks:
            if len(self._blocks) >= 4096:  # bounded: a long trace repeats few ids at a time
                self._blocks.pop(next(iter(self._blocks)))
            self._blocks[hash_id] = _words(
                self.spec.seed + 7927, hash_id, self._words_for(TRACE_BLOCK_TOKENS)
            )
        return self._blocks[hash_id]

    def _cap(self, n_in: int, n_out: int) -> int:
        if self.context is None:
            return n_in
        return max(1, min(n_in, self.context - n_out - CONTEXT_MARGIN_TOKENS))

    def _single(self, i: int, kind: str) -> Prompt:
        n_in, n_out = self.spec.lengths(kind)
        n_in = self._cap(n_in, n_out)
        return self._exact(i, n_out, [], _words(self.spec.seed, i, n_in * 2), n_in, 0)

    def _shared_prefix(self, i: int) -> Prompt:
        n_in, n_out = self.spec.lengths("short")
        n_in = self._cap(n_in, n_out)
        group = i // PREFIX_GROUP
        prefix = _words(self.spec.seed + 7919, group, self._words_for(n_in * 3 // 4))
        cached = self._prefix_tokens(prefix) if i % PREFIX_GROUP else 0
        return self._exact(i, n_out, prefix, _words(self.spec.seed, i, n_in * 2), n_in, cached)

    def _words_for(self, tokens: int) -> int:
        """Words that make about ``tokens`` tokens with the target's tokenizer (measured once)."""
        if self._tokens_per_word is None:
            sample = _words(self.spec.seed + 101, 0, 200)
            ids = self.tokenizer.ids(" ".join(sample)) if self.tokenizer is not None else None
            self._tokens_per_word = len(ids) / len(sample) if ids else 1.0
        return max(1, round(tokens / self._tokens_per_word))

    def _prefix_tokens(self, words: list[str]) -> int:
        """Tokens of a shared prefix the server should find cached: measured with its tokenizer, less one
        (the last token may merge with what follows); 0 (no expectation) without a tokenizer."""
        ids = self.tokenizer.ids(" ".join(words)) if self.tokenizer is not None and words else None
        return max(0, len(ids) - 1) if ids else 0

    def _turn(self, i: int) -> Prompt:
        """Conversation i // TURNS, turn i % TURNS: the history of earlier turns, then a new question."""
        n_in, n_out = self.spec.lengths("short")
        conv, turn = divmod(i, TURNS)
        history: list[str] = []
        turn_words, answer_words = self._words_for(n_in), self._words_for(n_out)
        for t in range(turn):
            history += _words(self.spec.seed + 31, conv * TURNS + t, turn_words)
            history += _words(self.spec.seed + 37, t, answer_words)
        cached = self._prefix_tokens(history)
        total = self._cap(len(history) + n_in, n_out)
        return self._exact(
            i, n_out, history, _words(self.spec.seed + 31, conv * TURNS + turn, n_in * 2), total, cached
        )

    def _exact(self, i: int, n_out: int, fixed: list[str], pool: list[str], n_in: int, cached: int) -> Prompt:
        if not self.spec.chat and self.spec.use_token_ids and self.tokenizer is not None:
            ids = self.tokenizer.ids(" ".join(fixed + pool))
            if ids is not None and len(ids) >= n_in:
                return Prompt(
                    index=i,
                    output_tokens=n_out,
                    token_ids=tuple(ids[:n_in]),
                    input_tokens=n_in,
                    verified=True,
                    expected_cached_tokens=cached,
                )
        words = max(1, min(len(pool), self._words_for(n_in) - len(fixed)))
        text, measured = self._measured(fixed, pool, words)
        fixed_tokens = measured - words * (self._tokens_per_word or 1.0) if measured else 0.0
        if measured and measured != n_in and measured > fixed_tokens:  # scale the free words once, then step
            scale = (n_in - fixed_tokens) / (measured - fixed_tokens)
            words = max(1, min(len(pool), round(words * scale)))
            text, measured = self._measured(fixed, pool, words)
        for _ in range(8):
            if measured is None or measured == n_in:
                break
            step = 1 if measured < n_in else -1
            if not 0 < words + step <= len(pool):
                break
            candidate = self._measured(fixed, pool, words + step)
            if candidate[1] is not None and abs(candidate[1] - n_in) > abs(measured - n_in):
                break  # a word is several tokens here: keep the closest, recorded as achieved
            words += step
            text, measured = candidate
        return self._made(i, n_out, text, measured, cached)

    def _measured(self, fixed: list[str], pool: list[str], words: int) -> tuple[str, int | None]:
        text = " ".join(fixed + pool[:words])
        return text, self._measure(text)

    def _measure(self, text: str) -> int | None:
        if self.tokenizer is None:
            return None
        if self.spec.chat:
            counted = self.tokenizer.count_chat([{"role": "user", "content": text}])
            if counted is not None:
                return counted
        ids = self.tokenizer.ids(text)
        return None if ids is None else len(ids)

    def _made(self, i: int, n_out: int, text: str, measured: int | None, cached: int) -> Prompt:
        tokens = measured if measured is not None else len(text.split())
        if self.spec.chat:
            messages = ({"role": "user", "content": text},)
            return Prompt(
                index=i,
                output_tokens=n_out,
                messages=messages,
                input_tokens=tokens,
                verified=measured is not None,
                expected_cached_tokens=cached,
            )
        return Prompt(
            index=i,
            output_tokens=n_out,
            text=text,
            input_tokens=tokens,
            verified=measured is not None,
            expected_cached_tokens=cached,
        )


# _words draws what `rng.choice(_WORDS)` would, `count` times, in bulk: CPython's choice over 62 words takes the
# top 6 bits of one 32-bit Mersenne Twister output and draws again when they are 62 or 63 (Random._randbelow);
# getrandbits(32 m) is m such outputs, least significant first. Checked against rng.choice in
# tests/unit/test_bench_workloads.py (building the prompts was ~90 ms of a predicted mixed ladder).
_TOP_6_BITS = bytes(b >> 2 for b in range(256))
_REDRAWN = bytes(b for b in range(256) if b >> 2 >= len(_WORDS))


def _words(seed: int, index: int, count: int) -> list[str]:
    rng, picks = random.Random(seed * 1_000_003 + index), b""
    while len(picks) < count:
        more = count - len(picks) + 16
        words = rng.getrandbits(32 * more).to_bytes(4 * more, "little")
        picks += words[3::4].translate(_TOP_6_BITS, _REDRAWN)
    return list(map(_WORDS.__getitem__, picks[:count]))

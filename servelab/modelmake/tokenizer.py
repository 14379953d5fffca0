"""A byte-level BPE vocabulary (GPT-2 style) trained here on a small built-in corpus: nothing is downloaded.

Tokens are the 256 byte symbols (GPT-2's byte-to-unicode map), then one token per learned merge, then the
special tokens. ``llama.cpp`` reads it as tokenizer model ``gpt2`` with pre-tokenizer ``gpt-2``.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from itertools import pairwise

from servelab.errors import ConfigError

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
TOKEN_NORMAL = 1
TOKEN_CONTROL = 3
TOKEN_UNUSED = 5
MIN_VOCAB = 256 + len(SPECIAL_TOKENS)
# GPT-2's pre-tokenizer, restricted to what Python's ``re`` can express.
PRETOKENIZE = re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+""")
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
CORPUS = """\
Serving a large language model on your own graphics cards is a chain of questions. Will the weights fit?
How much memory does the key and value cache take for the context you want? How many requests can run
at the same time, and how fast does each one decode? The answer starts with arithmetic: decoding one token
reads every weight once, so the weight bytes divided by the memory bandwidth give the ceiling on tokens per
second. At long context the cache reads join the weights. A hybrid model keeps a cache only in its full
attention layers; the linear attention layers hold a fixed state for each sequence. The server splits the
context between its slots, and nobody tells you when the context you asked for became a quarter of it.
Measure the time to the first token, the time per output token, the throughput of one stream and of all of
them together, and the tail of the latency distribution. Compare what you measured with what physics allows.
The quick brown fox jumps over the lazy dog. 0123456789 + - * / = ( ) [ ] { } < > , . ; : ! ? " ' # $ % &
def main(): return 42  # code, numbers 3.14159 and 2.71828, lists [1, 2, 3], paths /usr/local/bin
"""


@dataclass(frozen=True)
class Vocabulary:
    tokens: tuple[str, ...]
    token_types: tuple[int, ...]
    merges: tuple[str, ...]  # "left right", both sides already in byte-symbol form

    @property
    def size(self) -> int:
        return len(self.tokens)

    def token_id(self, token: str) -> int:
        return self.tokens.index(token)


def byte_symbols() -> list[str]:
    """GPT-2's reversible map from the 256 byte values to printable unicode characters, in byte order."""
    printable = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    codes = printable[:]
    extra = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            codes.append(256 + extra)
            extra += 1
    table = dict(zip(printable, codes, strict=True))
    return [chr(table[b]) for b in range(256)]


def _words(corpus: str, symbols: list[str]) -> Counter[tuple[str, ...]]:
    counts: Counter[tuple[str, ...]] = Counter()
    for piece in PRETOKENIZE.findall(corpus):
        counts[tuple(symbols[b] for b in piece.encode("utf-8"))] += 1
    return counts


def _best_pair(words: Counter[tuple[str, ...]]) -> tuple[str, str] | None:
    pairs: Counter[tuple[str, str]] = Counter()
    for word, count in words.items():
        for pair in pairwise(word):
            pairs[pair] += count
    if not pairs:
        return None
    # Most frequent first, ties broken by the pair itself, so training is deterministic.
    return max(pairs.items(), key=lambda item: (item[1], item[0]))[0]


def _merge(word: tuple[str, ...], pair: tuple[str, str]) -> tuple[str, ...]:
    out: list[str] = []
    i = 0
    while i < len(word):
        if i + 1 < len(word) and (word[i], word[i + 1]) == pair:
            out.append(word[i] + word[i + 1])
            i += 2
        else:
            out.append(word[i])
            i += 1
    return tuple(out)


def train_vocabulary(vocab_size: int, corpus: str = CORPUS) -> Vocabulary:
    """Learn merges on ``corpus`` until the vocabulary (bytes + merges + specials) has ``vocab_size`` tokens."""
    if vocab_size < MIN_VOCAB:
        raise ConfigError(f"vocabulary size {vocab_size} is too small: it needs at least {MIN_VOCAB} tokens")
    symbols = byte_symbols()
    words = _words(corpus, symbols)
    tokens, merges = list(symbols), []
    seen = set(tokens)
    while len(tokens) < vocab_size - len(SPECIAL_TOKENS):
        pair = _best_pair(words)
        if pair is None:
            break
        words = Counter({_merge(w, pair): c for w, c in words.items()})
        merges.append(f"{pair[0]} {pair[1]}")
        if pair[0] + pair[1] not in seen:
            seen.add(pair[0] + pair[1])
            tokens.append(pair[0] + pair[1])
    while len(tokens) < vocab_size - len(SPECIAL_TOKENS):  # corpus exhausted: pad with unused tokens
        tokens.append(f"<|unused_{len(tokens)}|>")
    types = [TOKEN_UNUSED if t.startswith("<|unused_") else TOKEN_NORMAL for t in tokens]
    types += [TOKEN_CONTROL] * len(SPECIAL_TOKENS)
    return Vocabulary(tuple(tokens) + SPECIAL_TOKENS, tuple(types), tuple(merges))

"""llama.cpp's own benchmark tools as the steps they run, for replaying a published llama-bench or
llama-batched-bench row (servelab/predict/corpus/harness.py, through `Engine.bench_replay`).

Sources (https://github.com/ggml-org/llama.cpp):
- `tools/llama-bench/llama-bench.cpp` `test_prompt`: a ppN test decodes the prompt in llama_decode calls of at most
  n_batch tokens (default 2048, `-b`); `test_gen`: a tgN test decodes N single tokens one call each. A `-d`
  depth first fills the context with d tokens, untimed. Each figure is tokens over the timed calls.
- `tools/batched-bench/batched-bench.cpp`: B sequences of PP prompt tokens in one batch, decoded in views of
  n_batch tokens, then TG steps each decoding one token of all B sequences (the prompts stay in the context).
- `llama_decode` splits each call into ubatches of at most n_ubatch tokens (default 512, `-ub`), each a forward
  pass that reads the weights again (the server's batches split the same way: scheduler.ubatches).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from servelab.engines.base import BenchWorkload
from servelab.engines.llamacpp.scheduler import DEFAULT_N_BATCH, DEFAULT_N_UBATCH, ubatches
from servelab.scheduling.core import Request, Sequence, Step, Work

CLIENTS: tuple[str, ...] = ("llama-bench", "llama-batched-bench")


def _whole(value: object, default: int) -> int:
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return int(value)
    return default


def batches(flags: Mapping[str, object]) -> tuple[int, int]:
    """(n_batch, n_ubatch) the row's flags state, else the tools' defaults."""
    n_batch = _whole(flags.get("n_batch"), DEFAULT_N_BATCH)
    return n_batch, min(n_batch, _whole(flags.get("n_ubatch"), DEFAULT_N_UBATCH))


def prompt_steps(w: BenchWorkload, flags: Mapping[str, object]) -> Iterator[Step]:
    """The timed steps of the prompt test: every sequence's prompt after its depth, n_batch tokens a call, each
    call in ubatches."""
    n_batch, n_ubatch = batches(flags)
    seqs = [
        Sequence(request=Request(i, 0.0, tuple(range(w.depth + w.prompt_tokens)), 1))
        for i in range(w.sequences)
    ]
    pending = [(seq, w.depth, w.prompt_tokens) for seq in seqs]  # (sequence, next position, tokens left)
    while pending:
        works, room = [], n_batch
        while pending and room:
            seq, at, left = pending[0]
            take = min(left, room)
            works.append(Work(seq, take, at))
            room -= take
            if take == left:
                pending.pop(0)
            else:
                pending[0] = (seq, at + take, left - take)
        yield Step(ubatches(works, n_ubatch))


def decode_steps(w: BenchWorkload, flags: Mapping[str, object]) -> Iterator[Step]:
    """The timed steps of the generation test: output_tokens steps of one token per sequence, from its depth
    (llama-batched-bench, or a batch: the prompt stays in the context)."""
    start = w.depth + (w.prompt_tokens if w.client == "llama-batched-bench" or w.sequences > 1 else 0)
    seqs = [
        Sequence(request=Request(i, 0.0, tuple(range(start + 1)), w.output_tokens))
        for i in range(w.sequences)
    ]
    for seq in seqs:
        seq.computed, seq.generated = start, 1
    for k in range(w.output_tokens):
        yield Step(((*(Work(seq, 1, start + k) for seq in seqs),),))
        for seq in seqs:
            seq.computed += 1
            seq.generated += 1

"""llama-bench and llama-batched-bench as the steps they time (engines/llamacpp/bench_replay.py), reached
through the registry."""

from __future__ import annotations

from servelab.engines import registry
from servelab.engines.base import BenchWorkload


def _replay():  # type: ignore[no-untyped-def]
    replay = registry.get_engine("llama.cpp").bench_replay
    assert replay is not None and "llama-bench" in replay.CLIENTS
    return replay


def test_a_prompt_test_is_n_batch_calls_of_n_ubatch_passes() -> None:
    replay = _replay()
    steps = list(replay.prompt_steps(BenchWorkload("llama-bench", 4096, 0, depth=1000), {}))
    assert [len(s.passes) for s in steps] == [4, 4]  # two calls of 2048, four ubatches of 512 each
    assert steps[1].passes[0][0].context == 1000 + 2048
    steps = list(
        replay.prompt_steps(BenchWorkload("llama-bench", 4096, 0), {"n_batch": 4096, "n_ubatch": 1024})
    )
    assert [len(s.passes) for s in steps] == [4]
    assert sum(s.tokens for s in steps) == 4096


def test_batched_prompts_share_ubatches_and_their_decodes_keep_the_prompts() -> None:
    replay = _replay()
    w = BenchWorkload("llama-batched-bench", 128, 3, sequences=8)
    steps = list(replay.prompt_steps(w, {}))
    assert len(steps) == 1 and [sum(x.new for x in p) for p in steps[0].passes] == [512, 512]
    decodes = list(replay.decode_steps(w, {}))
    assert len(decodes) == 3 and all(len(s.works) == 8 for s in decodes)
    assert [s.works[0].context for s in decodes] == [128, 129, 130]
    # llama-bench's tgN runs from its depth alone
    single = list(replay.decode_steps(BenchWorkload("llama-bench", 512, 2, depth=64), {}))
    assert [s.works[0].context for s in single] == [64, 65]


def test_only_engines_with_their_own_tools_replay_them() -> None:
    assert registry.get_engine("vllm").bench_replay is None

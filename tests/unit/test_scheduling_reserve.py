"""sglang's admission reserve in the continuous-batching emulator (servelab/scheduling/continuous.py
`OutputReserve`): a long prompt is admitted only when the pool holds all of it and its output, so a burst of
prompts longer than the pool's share cannot livelock the prefill-only steps (the corpus row of 100 x 32k-token
prompts sent at once never finished before)."""

from __future__ import annotations

import pytest

from servelab.engines.sglang.scheduler import OUTPUT_RESERVE, scheduler
from servelab.engines.sglang.settings import SglangFigures
from servelab.predict.corpus import load_corpus
from servelab.predict.corpus.harness import pass_log, setup
from servelab.predict.emulator import emulate
from servelab.predict.roofline import AchievedRates, Roofline
from servelab.scheduling.continuous import ContinuousBatching, ContinuousSettings, OutputReserve
from servelab.scheduling.core import EngineSetup, Request

# the emulation is bounded by steps: a livelock raises instead of hanging the test
MAX_STEPS = 20_000
RESERVE = OutputReserve(clip_tokens=4096, initial_ratio=0.7, least_ratio=0.098, decay_steps=600)


def roofline() -> Roofline:
    return Roofline(
        weight_bytes=lambda tokens: 8e9,
        kv_full_bytes_per_token=1e5,
        kv_sliding_bytes_per_token=0.0,
        sliding_window=0,
        state_bytes=0.0,
        flops_per_token=1.6e10,
        attention_width_full=0.0,
        attention_width_sliding=0.0,
        rates=AchievedRates(bandwidth_bytes_s=1e12, flops_s=1e14, step_overhead_s=0.002),
    )


def burst(count: int, prompt: int, output: int) -> list[Request]:
    """`count` distinct prompts sent at once (the random dataset with no request rate)."""
    return [Request(i, 0.0, tuple(range(i * prompt, (i + 1) * prompt)), output) for i in range(count)]


def prefill_only(reserve: OutputReserve | None, **kw: int) -> ContinuousBatching:
    settings = dict(max_running=64, token_budget=16, block_tokens=1, total_blocks=100)
    return ContinuousBatching(
        ContinuousSettings(**{**settings, **kw}, mixed=False, prefix_caching=False, reserve=reserve)
    )


def test_a_burst_of_prompts_longer_than_the_pools_share_finishes_with_the_reserve() -> None:
    """10 prompts of 40 tokens on a 100-token pool, 16-token chunks: without the reserve a third prompt is
    admitted by its first chunk, outgrows the pool, preempts itself and starts again, for ever."""
    engine = prefill_only(RESERVE)
    done = emulate(engine, roofline(), burst(10, 40, 5), max_steps=MAX_STEPS)
    assert len(done) == 10 and engine.preempted == 0
    seqs = sorted((o.seq for o in done), key=lambda s: s.request.rid)
    # two fit at once (2 x (40 + 5) within 100 tokens, a third's 45 not beside them): each pair's first tokens
    # come before the pair ahead has finished, no third prompt starts before one of them has
    for k in range(2, 10):
        assert seqs[k].first_token_s > min(s.token_times[-1] for s in seqs[k - 2 : k])


def test_sglangs_scheduler_replays_a_burst_of_long_prompts_in_bounded_steps() -> None:
    """The corpus row's shape at a small scale through sglang's own scheduler: 24 prompts of 2,000 tokens sent
    at once to a 12,000-token pool with 512-token chunks (each prompt a sixth of the pool)."""
    figures = SglangFigures(
        mem_fraction_static=0.9,
        max_total_tokens=12_000,
        max_req_len=4096,
        max_running_requests=64,
        chunked_prefill_size=512,
        cuda_graph_max_bs=64,
        mamba_cache_size=0,
        kv_cell_bytes=0,
        mamba_state_bytes_per_request=0,
    )
    engine = scheduler(EngineSetup(figures, slots=64, context=4096))
    assert engine.settings.reserve == OUTPUT_RESERVE
    done = emulate(engine, roofline(), burst(24, 2000, 20), max_steps=MAX_STEPS)
    assert sorted(o.seq.generated for o in done) == [20] * 24 and engine.preempted == 0


def test_the_ratio_falls_with_decode_steps_and_the_fast_path_keeps_it() -> None:
    """Long outputs with a queue: admissions wait on the outputs owed, which shrink as the ratio falls each
    decode step; the runs of repeated decodes (`steady`) and one step at a time give the same times."""
    settings = dict(token_budget=64, total_blocks=2_000, block_tokens=16)
    runs = []
    for fast in (True, False):
        engine = prefill_only(RESERVE, **settings)
        done = emulate(engine, roofline(), burst(12, 300, 700), max_steps=MAX_STEPS, fast=fast)
        runs.append(sorted((o.seq.request.rid, o.seq.token_times) for o in done))
        assert RESERVE.least_ratio <= engine.ratio < RESERVE.initial_ratio
    assert runs[0] == runs[1]


def test_the_reserve_lets_fewer_in_than_the_first_chunk_alone() -> None:
    """With room for every first chunk but not for every whole prompt, the reserve admits fewer at once."""
    sixth, first_end = {}, {}
    for reserve in (RESERVE, None):
        engine = prefill_only(reserve, token_budget=512, total_blocks=3_000)
        done = emulate(engine, roofline(), burst(6, 400, 200), max_steps=MAX_STEPS)
        sixth[reserve is None] = max(o.seq.first_token_s for o in done)
        first_end[reserve is None] = min(o.seq.token_times[-1] for o in done)
    # without the reserve the 3,000-token pool takes all six prompts (2,400 tokens) at once; with it a request
    # joins n running ones while (n + 1) x 400 + 200 + n x 200 x 0.7 < 3,000: five at once, the sixth waits
    # for the first to finish
    assert sixth[True] < first_end[True]
    assert sixth[False] > first_end[False]


@pytest.mark.timeout(120)
def test_the_burst_of_100_long_prompts_replays_through_sglangs_scheduler() -> None:
    """vllm-gpustack-qwen3-14b-h100: 100 prompts of 32,000 tokens sent at once to sglang with Qwen3-14B-FP8,
    whose replay never ended (a prompt chunk admitted without room for the whole prompt preempted itself for
    ever); with sglang's admission reserve it ends, every request served."""
    (row,) = [
        r
        for r in load_corpus()
        if r.model == "Qwen/Qwen3-14B-FP8" and r.engine == "sglang" and r.workload.prompt_tokens == 32000
    ]
    s = setup(row)
    assert not isinstance(s, str), s
    t = pass_log(s, None)
    assert t.refused == 0
    assert t.step_tokens.sum() >= 100 * (32000 + 99)  # every prompt and output computed at least once
    assert set(t.figures) >= {"ttft_ms_median", "tpot_ms_median", "output_tok_s"}


def test_after_a_refusal_no_admission_is_tried_until_a_sequence_leaves() -> None:
    """sglang marks the running batch full when the reserve refuses a request and tries again only once the batch
    shrinks. Three prompts of 100 tokens with 600 to generate, a 1,720-token pool: the third needs 700 and sees
    1,720 - 200 - 2 x 600 x 0.7 = 680 at first (refused); some 30 decode steps later the test alone would let it
    in (the ratio falls faster than the two decodes fill the pool), then outgrow the pool and preempt. With the
    mark it waits for the first to finish, and nothing is preempted."""
    engine = prefill_only(RESERVE, total_blocks=1_720, token_budget=256)
    done = emulate(engine, roofline(), burst(3, 100, 600), max_steps=MAX_STEPS)
    seqs = sorted((o.seq for o in done), key=lambda s: s.request.rid)
    assert seqs[2].first_token_s > min(s.token_times[-1] for s in seqs[:2])
    assert engine.preempted == 0 and not engine.full

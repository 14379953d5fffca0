"""The emulator's optimised paths against straightforward references written out here: the block pool one
block at a time, the word tokenizer one word at a time and without its ids kept per prompt, repeated decodes
one token at a time, the records' stamps rounded one at a time, the eviction signal and a level's ITL, chunk
gaps and tokens in its window one record at a time (bench/metrics.py's per-record functions). Both run the
same ladders and scenarios; the records and level statistics must come out equal, bit for bit."""

from __future__ import annotations

import dataclasses
import statistics
from array import array

import pytest

from servelab.bench import metrics, summary
from servelab.cli.bench import build_config
from servelab.hardware.gpus import card_for
from servelab.model.load import load_model
from servelab.plan.make import search_plan
from servelab.predict import virtual_ladder
from servelab.predict.emulator import EngineLoop, emulate
from servelab.predict.machine import emulated_engine
from servelab.predict.machine import roofline as plan_roofline
from servelab.predict.roofline import Roofline
from servelab.predict.run import PredictTarget, predict
from servelab.predict.words import WordTokenizer
from servelab.scheduling import continuous
from servelab.scheduling.blocks import BlockPool
from servelab.scheduling.continuous import ContinuousBatching, ContinuousSettings
from servelab.scheduling.core import Request, Step
from tests.unit.test_predict_core import roofline


class ReferencePool(BlockPool):
    """The pool's rules one block at a time."""

    def hashes(self, seq):
        rid = seq.request.rid
        if rid not in self._hashes:
            prompt, size, out, h = seq.request.prompt, self.block_tokens, [], 0
            for k in range(len(prompt) // size):
                h = hash((h, prompt[k * size : (k + 1) * size]))
                out.append(h)
            self._hashes[rid] = out
        return self._hashes[rid]

    def cached_blocks(self, seq):
        if not self.prefix_caching:
            return []
        hits = []
        for h in self.hashes(seq)[: (seq.tokens - 1) // self.block_tokens]:
            if h not in self.refs:
                break
            hits.append(h)
        return hits

    def admit(self, seq, tokens, state_blocks=0):
        hits = self.cached_blocks(seq)
        cached = len(hits) * self.block_tokens
        need = self.blocks_for(max(tokens, cached)) - len(hits) + state_blocks
        if need > self.available() - sum(1 for h in hits if self.refs[h] == 0):
            return None
        for h in hits:
            if self.refs[h] == 0:
                del self.evictable[h]
            self.refs[h] += 1
        self.held[seq.request.rid] = list(hits)
        self._take(seq, need - state_blocks)
        self._take_free(state_blocks)
        self.state[seq.request.rid] = state_blocks
        return cached

    def _take_free(self, count):
        for _ in range(count):
            if self.free:
                self.free -= 1
            else:
                h, _ = self.evictable.popitem(last=False)
                del self.refs[h]

    def register(self, seq, upto=None):
        rid, blocks = seq.request.rid, self.held.get(seq.request.rid)
        if not self.prefix_caching or blocks is None:
            return
        done = seq.computed if upto is None else upto
        full = min(done, seq.prompt_len, len(blocks) * self.block_tokens) // self.block_tokens
        for k in range(self.published.get(rid, 0), full):
            h = self.hashes(seq)[k]
            if blocks[k] is None and h not in self.refs:
                blocks[k] = h
                self.refs[h] = 1
        self.published[rid] = max(full, self.published.get(rid, 0))

    def release(self, seq):
        self.free += self.state.pop(seq.request.rid, 0)
        self.published.pop(seq.request.rid, None)
        for h in self.held.pop(seq.request.rid, []):
            if h is None:
                self.free += 1
                continue
            self.refs[h] -= 1
            if self.refs[h] == 0:
                self.evictable[h] = None


def reference_ids(self, text):
    return [self._ids.setdefault(word, len(self._ids)) for word in text.split()]


def reference_repeat_decodes(self, step: Step, until: float) -> None:
    count = self.scheduler.steady(step) if step.works else 0
    times = self.roofline.repeated_decode_s(step, count) if count else None
    if not times:
        return
    now = self.now
    for dt in times:
        if now >= until:
            break
        now += dt
        for w in step.works:
            w.seq.computed += 1
            w.seq.generated += 1
            w.seq.token_times.append(now)
            w.seq.token_counts.append(1)
    self.now = now


def reference_stamps_ns(times_s, base_ns):
    return array("q", [base_ns + round(t * 1e9) for t in times_s])


def reference_eviction_signal(r):
    """bench/metrics.py's eviction signal as it read before numpy: the gaps as a list, statistics.median."""
    cached = r.cached_prompt_tokens
    if r.expected_cached_tokens and cached is not None and cached < r.expected_cached_tokens:
        return "cache_n"
    timings = r.server_timings or {}
    prompt_n = timings.get("prompt_n")
    if isinstance(prompt_n, int) and r.expected_prompt_tokens and prompt_n > r.expected_prompt_tokens:
        return "prompt_n"
    gaps = metrics.chunk_gaps_ms(r)
    if len(gaps) >= metrics.REPREFILL_MIN_GAPS:
        floor = max(
            metrics.REPREFILL_GAP_FACTOR * statistics.median(gaps),
            0.5 * (metrics.ttft_ms(r) or 0.0),
            metrics.REPREFILL_MIN_MS,
        )
        if max(gaps) >= floor:
            return "reprefill_gap"
    return None


class ReferenceChunks(summary._Chunks):
    """A level's ITL, chunk gaps and tokens in the window from the per-record functions of bench/metrics.py."""

    def __init__(self, ok) -> None:
        super().__init__(ok)
        self.aligned = False


def use_references(monkeypatch) -> None:
    monkeypatch.setattr(continuous, "BlockPool", ReferencePool)
    monkeypatch.setattr(WordTokenizer, "ids", reference_ids)
    monkeypatch.setattr(WordTokenizer, "prompt_ids", WordTokenizer._prompt_ids)  # no ids kept per prompt
    monkeypatch.setattr(EngineLoop, "_repeat_decodes", reference_repeat_decodes)
    monkeypatch.setattr(virtual_ladder, "stamps_ns", reference_stamps_ns)
    monkeypatch.setattr(metrics, "eviction_signal", reference_eviction_signal)
    monkeypatch.setattr(summary, "_Chunks", ReferenceChunks)
    monkeypatch.setattr(Roofline, "_split_pass_s", Roofline._pass_s)  # the step model's pass, sum by sum


def ladder(engine, workload: str, **options):
    config = build_config(
        {
            "targets": ["predict"],
            "concurrency": "1,4,16",
            "workload": workload,
            "requests": 24,
            "chat": True,
            **options,
        },
        None,
    )
    result = predict(config, engine, PredictTarget(engine=engine.engine, model="m", gpu="g", quant="q"))
    return [lv.stats for lv in result.targets[0].levels]


@pytest.fixture(scope="module")
def engines():
    model, card = load_model("Qwen/Qwen3-8B"), card_for("rtx4090")
    plans = {
        "vllm": search_plan(model, card, engine="vllm", quant="bf16", context=8192),
        "sglang": search_plan(model, card, engine="sglang", quant="bf16", context=8192),
        "llamacpp": search_plan(model, card, engine="llamacpp", quant="Q4_K_M", context=8192, parallel=16),
    }
    return {name: emulated_engine(plan, model, card) for name, plan in plans.items()}


@pytest.mark.parametrize("name", ["vllm", "sglang", "llamacpp"])
@pytest.mark.parametrize(
    "workload, options",
    [("mixed", {}), ("shared-prefix", {}), ("multi-turn", {"repeat": 2}), ("short", {"rate": 20.0})],
)
def test_a_predicted_ladder_is_the_same_as_the_reference_paths_give(
    engines, monkeypatch, name, workload, options
) -> None:
    fast = ladder(engines[name], workload, **options)
    use_references(monkeypatch)
    reference = ladder(engines[name], workload, **options)
    assert [s.requests for s in fast] == [s.requests for s in reference] and fast[0].requests > 0
    assert fast == reference


def shared_requests() -> list[Request]:
    """Prompts that share prefixes (two families, and the second half asks the first half's prompts again), so
    hits, blocks published while another holder has them, and eviction of cached chains all happen."""
    prompts = []
    for i in range(12):
        family = tuple(range(10_000 * (i % 2), 10_000 * (i % 2) + 64 + 8 * (i % 3)))
        own = tuple(range(100_000 + 1000 * i, 100_000 + 1000 * i + 20 + 5 * i))
        prompts.append(family + own if i % 3 else own)
    return [Request(i, 0.004 * i, prompts[i % 12], 12 + 3 * (i % 5)) for i in range(24)]


@pytest.mark.parametrize(
    "settings",
    [
        ContinuousSettings(max_running=8, token_budget=128, block_tokens=1, total_blocks=600, mixed=False),
        ContinuousSettings(max_running=8, token_budget=96, block_tokens=16, total_blocks=40),
        ContinuousSettings(
            max_running=8, token_budget=160, block_tokens=16, total_blocks=40, cache_on_schedule=True
        ),
        ContinuousSettings(max_running=6, token_budget=256, block_tokens=4, total_blocks=200, state_blocks=1),
    ],
    ids=["sglang-like tight pool", "vllm-like preempting", "vllm-like same-step hits", "hybrid state blocks"],
)
def test_the_block_pool_schedules_as_the_one_block_at_a_time_reference(monkeypatch, settings) -> None:
    """Small pools: prefix hits, blocks published while another holder has them, eviction and preemption."""
    fast = emulate(ContinuousBatching(settings), roofline(), shared_requests())
    monkeypatch.setattr(continuous, "BlockPool", ReferencePool)
    reference = emulate(ContinuousBatching(settings), roofline(), shared_requests())
    assert (
        sum(o.seq.preemptions for o in reference) > 0
        or settings.block_tokens != 16
        or settings.cache_on_schedule
    )
    assert sum(o.seq.cached for o in reference) > 0
    seen = [
        [
            dataclasses.astuple(o.seq.request),
            o.seq.token_times,
            o.seq.token_counts,
            o.seq.cached,
            o.seq.preemptions,
            o.refused,
        ]
        for o in fast
    ]
    want = [
        [
            dataclasses.astuple(o.seq.request),
            o.seq.token_times,
            o.seq.token_counts,
            o.seq.cached,
            o.seq.preemptions,
            o.refused,
        ]
        for o in reference
    ]
    assert seen == want


@pytest.mark.parametrize("engine, tp", [("vllm", 2), ("sglang", 1), ("llamacpp", 1)])
def test_the_step_models_pass_in_one_loop_is_the_sum_by_sum_one(engine, tp) -> None:
    """Roofline._split_pass_s (the fit-priced pass in one loop) against `_pass_s`'s helpers one sum at a time,
    on a hybrid model (recurrent state) under tensor parallelism: mixed passes of prompt chunks, decodes,
    recomputes after preemption and verified drafts, bit for bit."""
    import random

    from servelab.scheduling.core import Sequence, Work

    model, card = load_model("Qwen/Qwen3.5-27B"), card_for("rtx4090-48g")
    quant = "Q4_K_M" if engine == "llamacpp" else "fp8"
    plan = search_plan(model, card, engine=engine, quant=quant, context=8192, gpus=tp)
    line = plan_roofline(plan, model, card)
    assert line.rates.split and not line.sliding_window and line.rates.prefill_flops_s is not None
    assert line.state_bytes > 0
    rng = random.Random(tp)
    for _ in range(300):
        works = []
        for rid in range(rng.randrange(1, 40)):
            prompt = rng.randrange(1, 3000)
            seq = Sequence(request=Request(rid, 0.0, tuple(range(prompt)), 200))
            seq.generated = rng.choice((0, 0, 1, rng.randrange(1, 200)))
            kind = rng.random()
            if kind < 0.3:  # a prompt chunk (or a recompute after preemption when it has generated)
                context = rng.randrange(0, prompt)
                works.append(Work(seq, rng.randrange(1, prompt - context + 1), context))
            elif kind < 0.9:  # a decode
                works.append(Work(seq, 1, prompt + max(0, seq.generated - 1)))
            else:  # drafts verified
                works.append(Work(seq, 1, prompt + seq.generated, rng.randrange(1, 5)))
        assert line._split_pass_s(works) == line._pass_s(works)

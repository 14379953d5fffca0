"""The emulator on exact small scenarios: a hand-made roofline whose step times are worked out here."""

from __future__ import annotations

import dataclasses

import pytest

from servelab.engines.llamacpp.scheduler import LAUNCH_WINDOW_S, Slots, SlotSettings, ubatches
from servelab.predict.emulator import emulate
from servelab.predict.roofline import AchievedRates, Roofline
from servelab.scheduling.continuous import ContinuousBatching, ContinuousSettings
from servelab.scheduling.core import Request, Sequence, Step, Work

W = 8e9  # weight bytes per pass
KV = 1e5  # KV bytes per token
FLOPS = 1.6e10  # per token
EFF = AchievedRates(bandwidth_bytes_s=1e12, flops_s=1e14, step_overhead_s=0.002, token_overhead_s=1e-5)


def roofline(rates: AchievedRates = EFF) -> Roofline:
    return Roofline(
        weight_bytes=lambda tokens: W,
        kv_full_bytes_per_token=KV,
        kv_sliding_bytes_per_token=0.0,
        sliding_window=0,
        state_bytes=0.0,
        flops_per_token=FLOPS,
        attention_width_full=0.0,
        attention_width_sliding=0.0,
        rates=rates,
    )


def pass_by_hand(works: list[tuple[int, int]]) -> float:
    """(new, context) per sequence -> the longer of memory and compute time (the roofline written out)."""
    memory = (W + sum(KV * (c + n) for n, c in works)) / EFF.bandwidth_bytes_s
    compute = sum(n for n, _ in works) * FLOPS / EFF.flops_s
    return max(memory, compute)


def step_by_hand(works: list[tuple[int, int]]) -> float:
    return pass_by_hand(works) + EFF.step_overhead_s + EFF.token_overhead_s * sum(n for n, _ in works)


def vllm_like(**kw) -> ContinuousBatching:
    settings = dict(max_running=256, token_budget=2048, block_tokens=16, total_blocks=10_000)
    return ContinuousBatching(ContinuousSettings(**{**settings, **kw}))


def req(rid: int, prompt: int, out: int, at: float = 0.0, base: int = 0) -> Request:
    return Request(rid, at, tuple(range(base, base + prompt)), out)


def by_id(outcomes):
    return {o.seq.request.rid: o.seq for o in outcomes}


def test_one_request_ttft_is_the_prefill_step_and_tpot_the_decode_steps() -> None:
    prompt, out = 1000, 8
    seq = by_id(emulate(vllm_like(), roofline(), [req(0, prompt, out)]))[0]
    assert seq.first_token_s == pytest.approx(step_by_hand([(prompt, 0)]))
    decode_steps = [step_by_hand([(1, prompt + k)]) for k in range(out - 1)]
    tpot = (seq.token_times[-1] - seq.token_times[0]) / (out - 1)
    assert tpot == pytest.approx(sum(decode_steps) / (out - 1))
    assert seq.token_counts == [1] * out


def test_prefill_longer_than_the_budget_is_chunked() -> None:
    seq = by_id(emulate(vllm_like(token_budget=512), roofline(), [req(0, 1200, 2)]))[0]
    chunks = step_by_hand([(512, 0)]) + step_by_hand([(512, 512)]) + step_by_hand([(176, 1024)])
    assert seq.first_token_s == pytest.approx(chunks)


def test_llamacpp_two_slots_three_requests_the_third_queues() -> None:
    slots = Slots(SlotSettings(slots=2, context_per_slot=4096))
    done = emulate(slots, roofline(), [req(i, 100, 4, base=1000 * i) for i in range(3)])
    seqs = by_id(done)
    first_end = max(seqs[0].token_times[-1], seqs[1].token_times[-1])
    assert seqs[0].first_token_s == seqs[1].first_token_s == pytest.approx(step_by_hand([(100, 0), (100, 0)]))
    assert seqs[2].first_token_s == pytest.approx(first_end + step_by_hand([(100, 0)]))
    assert [o.seq.request.rid for o in done][-1] == 2


def _stall(scheduler) -> float:
    """Two short requests decoding; a 6000-token prompt arrives just after llama-server's launch window (the
    first step has started without it): the short requests' longest gap between tokens."""
    shorts = [req(0, 50, 6), req(1, 50, 6, base=100)]
    long = req(2, 6000, 2, at=LAUNCH_WINDOW_S + 1e-9, base=10_000)
    seqs = by_id(emulate(scheduler, roofline(), [*shorts, long]))
    gaps = [b - a for a, b in zip(seqs[0].token_times, seqs[0].token_times[1:], strict=False)]
    return max(gaps)


def test_long_prompt_stalls_llamacpp_unified_batch_by_the_whole_prompt() -> None:
    slots = Slots(SlotSettings(slots=3, context_per_slot=8192, n_batch=8192, n_ubatch=512))
    gap = _stall(slots)
    s = [Sequence(request=req(0, 50, 6)), Sequence(request=req(1, 50, 6)), Sequence(request=req(2, 6000, 2))]
    batch = [Work(s[0], 1, 50), Work(s[1], 1, 50), Work(s[2], 6000, 0)]
    passes = ubatches(batch, 512)
    assert len(passes) == 12  # 6002 tokens in ubatches of 512
    by_hand = sum(pass_by_hand([(w.new, w.context) for w in p]) for p in passes)
    by_hand += EFF.step_overhead_s + EFF.token_overhead_s * 6002
    assert gap == pytest.approx(by_hand)
    assert gap == pytest.approx(roofline().step_s(Step(passes)))


def test_chunked_prefill_bounds_the_stall_by_the_budget() -> None:
    gap = _stall(vllm_like(token_budget=256))
    assert gap == pytest.approx(step_by_hand([(1, 50), (1, 50), (254, 0)]))
    slots = Slots(SlotSettings(slots=3, context_per_slot=8192, n_batch=8192, n_ubatch=512))
    llama_gap = _stall(slots)
    assert gap < llama_gap / 10


def test_sglang_prefill_steps_apart_stall_decodes_until_the_prompt_is_in() -> None:
    """Without mixed chunks a prefill step runs alone, and the chunked prompt goes on in the next prefill
    step: the decodes wait for every chunk, then decode with the long request."""
    gap = _stall(vllm_like(token_budget=256, mixed=False))
    chunks = [(256, 256 * k) for k in range(23)] + [(6000 - 23 * 256, 23 * 256)]
    by_hand = sum(step_by_hand([chunk]) for chunk in chunks) + step_by_hand([(1, 50), (1, 50), (1, 6000)])
    assert gap == pytest.approx(by_hand)


class Recording:
    """A scheduler that keeps every step it hands out."""

    def __init__(self, inner) -> None:
        self.inner, self.steps = inner, []
        self.launch_window_s = inner.launch_window_s

    def add(self, seq):
        return self.inner.add(seq)

    def has_work(self):
        return self.inner.has_work()

    def finished(self, seq):
        self.inner.finished(seq)

    def schedule(self):
        step = self.inner.schedule()
        if step is not None:
            self.steps.append(step)
        return step


def test_kv_pool_exhaustion_preempts_the_last_admitted_and_recomputes_it() -> None:
    prompt, out = 8, 16
    sched = Recording(vllm_like(block_tokens=4, total_blocks=8, prefix_caching=False))
    seqs = by_id(emulate(sched, roofline(), [req(0, prompt, out), req(1, prompt, out, base=100)], fast=False))
    assert seqs[0].preemptions == 0 and seqs[1].preemptions == 1
    assert seqs[0].generated == seqs[1].generated == out
    recompute = [
        w for s in sched.steps for w in s.works if w.seq is seqs[1] and w.context == 0 and w.new > prompt
    ]
    assert len(recompute) == 1
    generated_then = recompute[0].new - prompt
    no_preemption = 2 * (prompt + out - 1)
    assert sum(s.tokens for s in sched.steps) == no_preemption + (prompt + generated_then - 1)
    assert recompute[0].new <= 8 * 4  # the pool holds 32 tokens


def test_prefix_cache_hit_shortens_ttft() -> None:
    a = Request(0, 0.0, tuple(range(64)), 2)
    b = Request(1, 1.0, (*range(48), *range(500, 516)), 2)
    hit = by_id(emulate(vllm_like(), roofline(), [a, b]))[1]
    miss = by_id(emulate(vllm_like(prefix_caching=False), roofline(), [a, b]))[1]
    assert hit.cached == 48 and miss.cached == 0
    assert hit.first_token_s - 1.0 == pytest.approx(step_by_hand([(16, 48)]))
    assert miss.first_token_s - 1.0 == pytest.approx(step_by_hand([(64, 0)]))


def test_llamacpp_reuses_a_similar_slot_and_loses_a_slot_taken_by_another_prompt() -> None:
    a = Request(0, 0.0, tuple(range(64)), 2)
    b = Request(1, 1.0, (*range(48), *range(500, 516)), 2)
    c = Request(2, 1.0, tuple(range(900, 964)), 2)
    one = SlotSettings(slots=1, context_per_slot=4096)
    assert by_id(emulate(Slots(one), roofline(), [a, b]))[1].cached == 48
    later_b = Request(1, 2.0, b.prompt, 2)
    lost = by_id(emulate(Slots(one), roofline(), [a, c, later_b]))
    assert lost[2].cached == 0 and lost[1].cached == 0  # c took the only slot: a's prompt is gone


def test_a_request_longer_than_a_slot_is_refused() -> None:
    done = emulate(Slots(SlotSettings(slots=1, context_per_slot=100)), roofline(), [req(0, 90, 20)])
    assert done[0].refused is not None and "context" in done[0].refused


@pytest.mark.parametrize(
    "make",
    [
        lambda: vllm_like(token_budget=256),
        lambda: vllm_like(token_budget=256, mixed=False),
        lambda: vllm_like(block_tokens=4, total_blocks=40),
        lambda: Slots(SlotSettings(slots=3, context_per_slot=8192, n_batch=512, n_ubatch=128)),
    ],
)
def test_the_fast_path_for_repeated_decodes_gives_the_same_times(make) -> None:
    """Runs of identical decode steps priced in one loop land on exactly the times of stepping one by one."""
    arrivals = [req(i, 40 + 30 * i, 20 + 7 * i, at=0.013 * i, base=1000 * i) for i in range(6)]
    fast = by_id(emulate(make(), roofline(), arrivals))
    slow = by_id(emulate(make(), roofline(), arrivals, fast=False))
    for rid, seq in slow.items():
        assert fast[rid].token_times == pytest.approx(seq.token_times, rel=1e-12)
        assert fast[rid].generated == seq.generated and fast[rid].preemptions == seq.preemptions


def test_the_output_head_is_paid_only_where_logits_are_computed() -> None:
    """A prompt's last position, each decode and every verified draft pay the lm_head; a prompt chunk that does
    not reach the prompt's end pays none (as vLLM's logits_indices and llama.cpp's batch.logits select)."""
    head = 4e9
    r = Roofline(
        weight_bytes=lambda tokens: 0.0,
        kv_full_bytes_per_token=0.0,
        kv_sliding_bytes_per_token=0.0,
        sliding_window=0,
        state_bytes=0.0,
        flops_per_token=FLOPS,
        attention_width_full=0.0,
        attention_width_sliding=0.0,
        rates=EFF,
        head_flops_per_token=head,
    )
    seq = Sequence(request=req(0, 100, 8))
    body = FLOPS - head
    assert r.pass_flops([Work(seq, 60, 0)]) == 60 * body  # the first chunk of a 100-token prompt
    assert r.pass_flops([Work(seq, 40, 60)]) == 40 * body + head  # its end: one position's logits
    assert r.pass_flops([Work(seq, 1, 100)]) == body + head  # a decode
    assert r.pass_flops([Work(seq, 1, 100, verify=3)]) == 4 * body + 4 * head  # a verify of three drafts
    both = [Work(seq, 60, 0), Work(Sequence(request=req(1, 10, 8)), 1, 10)]
    assert r.pass_s(both) == pytest.approx((61 * body + head) / EFF.flops_s)  # the unrolled sums agree
    assert r.pass_s(both) == pytest.approx(r.pass_flops(both) / EFF.flops_s)


def test_prompt_tokens_are_priced_at_the_prefill_compute_decodes_at_the_other() -> None:
    """A pass of 200 prompt tokens and 2 decodes, compute-bound: prompt FLOPs / prefill compute + decode FLOPs
    / compute; without a prefill figure, all at the one compute (the plan's pricing)."""
    slow = AchievedRates(bandwidth_bytes_s=1e13, flops_s=1e14, prefill_flops_s=2e14)
    prompt, a, b = (
        Sequence(request=req(0, 200, 2)),
        Sequence(request=req(1, 50, 4)),
        Sequence(request=req(2, 50, 4)),
    )
    a.generated = b.generated = 1  # decoding: one token sampled already
    works = (Work(prompt, 200, 0), Work(a, 1, 50), Work(b, 1, 50))
    assert [w.prompt for w in works] == [True, False, False]
    by_hand = 200 * FLOPS / 2e14 + 2 * FLOPS / 1e14
    assert roofline(slow).pass_s(works) == pytest.approx(by_hand)
    assert roofline(AchievedRates(bandwidth_bytes_s=1e13, flops_s=1e14)).pass_s(works) == pytest.approx(
        202 * FLOPS / 1e14
    )
    only_decodes = works[1:]
    assert roofline(slow).pass_s(only_decodes) == roofline(
        AchievedRates(bandwidth_bytes_s=1e13, flops_s=1e14)
    ).pass_s(only_decodes)


def test_llamacpp_takes_in_requests_that_arrive_while_it_launches_one_vllm_steps_at_once() -> None:
    """Two prompts 2 ms apart on an idle engine: llama-server launches the first, the second arrives within
    LAUNCH_WINDOW_S and joins its batch (one step from the second's arrival); vLLM's engine core steps the
    first at once and the second waits for that step."""
    arrivals = [req(0, 100, 2), req(1, 100, 2, at=0.002, base=1000)]
    slots = by_id(emulate(Slots(SlotSettings(slots=2, context_per_slot=4096)), roofline(), arrivals))
    assert (
        slots[0].first_token_s
        == slots[1].first_token_s
        == pytest.approx(0.002 + step_by_hand([(100, 0), (100, 0)]))
    )
    vllm = by_id(emulate(vllm_like(), roofline(), arrivals))
    assert vllm[0].first_token_s == pytest.approx(step_by_hand([(100, 0)]))
    assert vllm[1].first_token_s > vllm[0].first_token_s
    late = [req(0, 100, 2), req(1, 100, 2, at=LAUNCH_WINDOW_S + 1e-4, base=1000)]
    apart = by_id(emulate(Slots(SlotSettings(slots=2, context_per_slot=4096)), roofline(), late))
    assert apart[0].first_token_s == pytest.approx(step_by_hand([(100, 0)]))


def test_vllm_shares_a_prefix_computed_in_the_same_step_sglang_only_once_computed() -> None:
    """Two prompts with a 320-token common prefix arrive together. vLLM hashes the blocks a step computes as it
    schedules them (allocate_slots -> cache_blocks), so the second prompt, admitted after the first in that step,
    reuses all 20 full blocks of the prefix and the step computes it once; without that (sglang's radix tree,
    filled after the prefill) both prompts are computed whole."""
    prefix = tuple(range(320))
    prompts = [
        Request(0, 0.0, prefix + tuple(range(1000, 1100)), 4),
        Request(1, 0.0, prefix + (5000,) * 90, 4),
    ]
    same_step = by_id(emulate(vllm_like(cache_on_schedule=True), roofline(), prompts))
    apart = by_id(emulate(vllm_like(), roofline(), prompts))
    assert (same_step[0].cached, same_step[1].cached) == (0, 320)
    assert (apart[0].cached, apart[1].cached) == (0, 0)
    assert same_step[1].first_token_s == pytest.approx(step_by_hand([(420, 0), (90, 320)]))
    assert apart[1].first_token_s == pytest.approx(step_by_hand([(420, 0), (410, 0)]))
    assert same_step[1].first_token_s < apart[1].first_token_s


def test_a_cpu_engines_decode_attention_is_priced_after_the_max_at_its_own_rate() -> None:
    """llama.cpp on a CPU attends the KV cache after the matmuls at a fraction of the compute figure
    (Engine.cpu_decode_attention): a decode pays 4 x width x (context + 1/2) FLOPs at compute x ratio on top of the
    max(); a prompt's attention stays inside it; the repeated-decode fast path lands on the same times."""
    width, ratio = 1024.0, 0.125
    apart = dataclasses.replace(roofline(), attention_width_full=width, decode_attention_ratio=ratio)
    inside = dataclasses.replace(roofline(), attention_width_full=width)
    seq = Sequence(request=Request(0, 0.0, tuple(range(600)), 8))
    seq.generated = 1
    decode = [Work(seq, 1, 600)]
    attention = 4 * width * (600 + 0.5)
    assert apart.pass_s(decode) == pytest.approx(
        max((W + KV * 601) / EFF.bandwidth_bytes_s, (FLOPS) / EFF.flops_s) + attention / (EFF.flops_s * ratio)
    )
    assert apart.pass_s(decode) > inside.pass_s(decode)
    fresh = Sequence(request=Request(1, 0.0, tuple(range(600)), 8))
    prompt = [Work(fresh, 600, 0)]
    assert apart.pass_s(prompt) == pytest.approx(inside.pass_s(prompt))
    arrivals = [req(i, 40 + 30 * i, 20 + 7 * i, at=0.013 * i, base=1000 * i) for i in range(6)]
    for make in (
        lambda: vllm_like(token_budget=256),
        lambda: Slots(SlotSettings(slots=3, context_per_slot=8192)),
    ):
        fast = by_id(emulate(make(), apart, arrivals))
        slow = by_id(emulate(make(), apart, arrivals, fast=False))
        for rid, s in slow.items():
            assert fast[rid].token_times == pytest.approx(s.token_times, rel=1e-12)

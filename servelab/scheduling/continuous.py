"""Continuous batching as vLLM V1 and sglang schedule it (a leaf: `engines/vllm|sglang/scheduler.py` set it up).

Each step has a token budget (vLLM max_num_batched_tokens, sglang chunked_prefill_size). Running sequences go
first, in arrival order: a decode takes one token (1 + drafts with speculative decoding), a prompt being
prefilled takes what is left of the budget (chunked prefill); then waiting requests are admitted in arrival
order while the budget, the running cap (`max_running`, each engine's own name in its scheduler), the state pool (hybrid models)
and the KV pool allow. `mixed` False is sglang's default: a step with prompts to prefill runs only them, and
the decodes wait for the next step. When a running sequence needs a block the pool does not have, the
sequence admitted last is preempted: its blocks are freed and it is computed again from scratch
(vLLM `_preempt_request`, recompute; sglang retract_decode), prefix-cache hits included.

With an `OutputReserve` (sglang), a waiting request is admitted only when the pool holds its whole remaining
prompt and its (clipped) output besides what the running sequences are owed: admitting a prompt chunk by chunk
without it, a long prompt that outgrows the pool preempts itself and is admitted again from its first chunk,
for ever, while the decodes that would free the pool never run (a step with prompts to prefill runs only them).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from servelab.scheduling.blocks import BlockPool
from servelab.scheduling.core import Sequence, Speculation, Step, Work


@dataclass(frozen=True, kw_only=True)
class OutputReserve:
    """What admission keeps for the outputs still to come (sglang's PrefillAdder): a request joins when its
    remaining prompt plus min(its output left, `clip_tokens`) is below the pool's free and evictable tokens less,
    for each running sequence, the prompt it has yet to hold plus min(its output left, `clip_tokens`) times the
    new-token ratio. The ratio starts at `initial_ratio`, falls by (initial - least) / `decay_steps` each decode
    step to `least_ratio`, and is back at `initial_ratio` after a decode step that preempted. Once the test
    refuses a request, no admission is tried until a running sequence finishes or is preempted (sglang marks the
    running batch full on NO_TOKEN and clears the mark when the batch shrinks)."""

    clip_tokens: int
    initial_ratio: float
    least_ratio: float
    decay_steps: int


@dataclass(frozen=True, kw_only=True)
class ContinuousSettings:
    max_running: int
    token_budget: int  # tokens one step computes at most
    block_tokens: int  # tokens per KV block (sglang: 1)
    total_blocks: int  # the KV pool
    state_slots: int | None = None  # hybrid models: recurrent states the engine keeps (caps running)
    state_blocks: int = 0  # blocks of the KV pool each sequence's state takes (vLLM's hybrid allocator)
    mixed: bool = (
        True  # prefill chunks and decodes in one step (vLLM V1); False: prefill steps apart (sglang)
    )
    prefix_caching: bool = True
    # vLLM V1 hashes a step's blocks when it schedules them (KVCacheManager.allocate_slots -> cache_blocks, before
    # the forward), so a request admitted later in the same step hits what an earlier one is computing; False:
    # blocks become shareable once computed (sglang inserts into its radix tree after the prefill)
    cache_on_schedule: bool = False
    speculation: Speculation | None = None
    reserve: OutputReserve | None = None  # None: a request is admitted when its first chunk fits (vLLM)


class ContinuousBatching:
    launch_window_s = 0.0  # the engine core takes in what arrived and steps at once

    def __init__(self, settings: ContinuousSettings) -> None:
        self.settings = settings
        self.pool = BlockPool(
            settings.total_blocks, settings.block_tokens, prefix_caching=settings.prefix_caching
        )
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.ratio = settings.reserve.initial_ratio if settings.reserve else 0.0
        self._repeating: tuple[Sequence, int] | None = (
            None  # the sequence `steady` let repeat, its tokens then
        )
        self.preempted = 0  # preemptions so far
        self.full = False  # the reserve refused an admission: none is tried until a sequence leaves
        self._gone: set[int] = set()  # request ids preempted during the current `_running` pass

    def add(self, seq: Sequence) -> str | None:
        s = self.settings
        most = seq.prompt_len + seq.request.output_tokens
        room = s.total_blocks * s.block_tokens
        if self.pool.blocks_for(most) + s.state_blocks > s.total_blocks or (
            s.reserve and seq.prompt_len + min(seq.request.output_tokens, s.reserve.clip_tokens) >= room
        ):
            return f"the KV pool holds {room} tokens; this request needs {most}"
        self.waiting.append(seq)
        return None

    def has_work(self) -> bool:
        return bool(self.waiting or self.running)

    def finished(self, seq: Sequence) -> None:
        self.pool.register(seq)
        self.pool.release(seq)
        self.running.remove(seq)
        self.full = False

    def steady(self, step: Step) -> int:
        works = step.works
        if len(works) != len(self.running) or any(
            w.new != 1 or w.verify or not w.seq.decoding for w in works
        ):
            return 0
        if self.waiting and self._can_admit():
            return 0  # an admission might happen next step
        repeats = min(w.seq.request.output_tokens - w.seq.generated for w in works) - 1
        if repeats <= 0:
            return 0
        if self.waiting and self.settings.reserve and self._can_admit(ahead=repeats):
            return 0  # the ratio falls while they repeat: an admission might happen before they end
        pool = self.pool
        blocks = sum(
            pool.blocks_for(w.seq.tokens + repeats) - len(pool.held[w.seq.request.rid]) for w in works
        )
        if blocks > pool.available():
            return 0
        self._repeating = (works[0].seq, works[0].seq.generated)
        return repeats

    def schedule(self) -> Step | None:
        self._count_repeated()
        if self.settings.mixed:
            before = self.preempted
            works = self._running(self.settings.token_budget, decodes=True, prefills=True)
            if any(w.seq.decoding for w in works):
                self._decoded(1, preempted=self.preempted > before)
            if self.settings.cache_on_schedule:
                for w in works:
                    self._publish_scheduled(w)
            works += self._admit(self.settings.token_budget - _tokens(works))
        else:  # a prefill step while there are prompts to prefill, else a decode step
            works = self._running(self.settings.token_budget, decodes=False, prefills=True)
            works += self._admit(self.settings.token_budget - _tokens(works))
            if not works:
                before = self.preempted
                works = self._running(None, decodes=True, prefills=False)
                self._decoded(1, preempted=self.preempted > before)
        for w in works:
            if w.context <= w.seq.prompt_len:  # its prompt blocks computed so far become shareable
                self.pool.register(w.seq)
        return Step((tuple(works),)) if works else None

    def _running(self, budget: int | None, *, decodes: bool, prefills: bool) -> list[Work]:
        """Work for the running sequences in order, within `budget` tokens (None: no cap)."""
        works: list[Work] = []
        left = budget
        self._gone = set()
        for seq in list(self.running):
            if left is not None and left <= 0:
                break
            if not (decodes if seq.decoding else prefills) or seq.request.rid in self._gone:
                continue  # not this kind of step, or preempted by an earlier one this step
            work = self._work(seq, left)
            if self._grow(seq, work, works):
                works.append(work)
                left = None if left is None else left - work.new - work.verify
        return works

    def _work(self, seq: Sequence, budget: int | None) -> Work:
        spec = self.settings.speculation
        if seq.decoding:
            verify = spec.gamma if spec is not None else 0
            return Work(seq, 1, seq.computed, verify)
        return Work(seq, seq.pending if budget is None else min(seq.pending, budget), seq.computed)

    def _grow(self, seq: Sequence, work: Work, works: list[Work]) -> bool:
        """Blocks for `work`, preempting the last admitted sequences until there are; False when `seq` itself
        was preempted."""
        while not self.pool.grow(seq, work.context + work.new + work.verify):
            victim = self.running[-1]
            self._preempt(victim, works)
            if victim is seq:
                return False
        return True

    def _preempt(self, seq: Sequence, works: list[Work]) -> None:
        self.pool.release(seq)
        self.running.remove(seq)
        works[:] = [w for w in works if w.seq is not seq]
        seq.computed, seq.preemptions = 0, seq.preemptions + 1
        self.preempted += 1
        self.full = False
        self._gone.add(seq.request.rid)
        self.waiting.appendleft(seq)

    def _can_admit(self, ahead: int = 0, owed: float | None = None, *, attempt: bool = False) -> bool:
        """Whether the first waiting request may join now (`ahead`: or after that many decode steps at most,
        the reserve's most hopeful bound: the pool as now, each output that much shorter, the ratio at its
        least; `owed`: the reserve's sum over the running sequences, when the caller keeps it). An `attempt`
        the reserve refuses marks the batch full (`OutputReserve`)."""
        s = self.settings
        if not self.waiting or len(self.running) >= s.max_running:
            return False
        if s.state_slots is not None and len(self.running) >= s.state_slots:
            return False
        r = s.reserve
        if r is None:
            return True
        if self.full:
            return False
        owed = self._owed(r, ahead) if owed is None else owed
        seq, pool = self.waiting[0], self.pool
        hit = len(pool.cached_blocks(seq)) * pool.block_tokens
        need = seq.tokens - hit + min(seq.request.output_tokens - seq.generated, r.clip_tokens)
        fits = (
            need < pool.available() * pool.block_tokens - owed
        )  # sglang's `total_tokens < rem_total_tokens`
        self.full = attempt and not fits
        return fits

    def _owed(self, r: OutputReserve, ahead: int = 0) -> float:
        """What the running sequences are owed (`OutputReserve`), `ahead` decode steps on at the least ratio."""
        ratio = r.least_ratio if ahead else self.ratio
        return sum(self._owed_by(r, seq, ratio, ahead) for seq in self.running)

    def _owed_by(self, r: OutputReserve, seq: Sequence, ratio: float, ahead: int = 0) -> float:
        held = len(self.pool.held.get(seq.request.rid, ())) * self.pool.block_tokens
        left = max(0, seq.request.output_tokens - seq.generated - ahead)
        return max(0, seq.prompt_len - held) + min(left, r.clip_tokens) * ratio

    def _decoded(self, steps: int, *, preempted: bool = False) -> None:
        """The reserve's ratio after `steps` decode steps (back to its start after one that preempted)."""
        r = self.settings.reserve
        if r is None:
            return
        if preempted:
            self.ratio = r.initial_ratio
            return
        fall = (r.initial_ratio - r.least_ratio) / r.decay_steps
        self.ratio = max(r.least_ratio, self.ratio - fall * steps)

    def _count_repeated(self) -> None:
        """The decode steps the emulator ran after `steady` said they repeat (it may stop them early)."""
        if self._repeating is not None:
            seq, generated = self._repeating
            self._repeating = None
            self._decoded(seq.generated - generated)

    def _admit(self, budget: int) -> list[Work]:
        works = []
        r = self.settings.reserve
        owed = self._owed(r) if r else None  # kept as requests join: one pass over the running per step
        while budget > 0 and self._can_admit(owed=owed, attempt=True):
            seq = self.waiting[0]
            hit = len(self.pool.cached_blocks(seq)) * self.pool.block_tokens
            cached = self.pool.admit(seq, hit + min(seq.tokens - hit, budget), self.settings.state_blocks)
            if cached is None:
                break
            self.waiting.popleft()
            if seq.preemptions == 0 or not seq.token_times:
                seq.cached = cached
            seq.computed = cached
            new = min(seq.pending, budget)
            work = Work(seq, new, cached)
            works.append(work)
            self.running.append(seq)
            if r is not None and owed is not None:
                owed += self._owed_by(r, seq, self.ratio)
            if self.settings.cache_on_schedule:
                self._publish_scheduled(work)
            budget -= new
        return works

    def _publish_scheduled(self, work: Work) -> None:
        """vLLM: the prompt blocks this step computes become shareable as it is scheduled (cache_on_schedule)."""
        if work.context < work.seq.prompt_len:
            self.pool.register(work.seq, work.context + work.new)


def _tokens(works: list[Work]) -> int:
    return sum(w.new + w.verify for w in works)

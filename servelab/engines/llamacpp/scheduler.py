"""llama-server's slots, for the emulator (servelab/predict): how `server_context::update_slots` batches.

Sources (docs/reference/memory.md §4, https://github.com/ggml-org/llama.cpp `tools/server/server-context.cpp`):
- n_parallel slots, each with its own context window (n_ctx_per_slot); a request waits in the task queue until
  a slot is idle (no admission beyond the slots).
- Slot choice: the idle slot whose cached prompt shares the longest common prefix with the new prompt, when
  that prefix is more than `--slot-prompt-similarity` (0.10) of the prompt; else the least recently used idle
  slot. The slot reuses the common prefix (cache_prompt) and its other cached tokens are lost.
- One unified batch per iteration: first the sampled token of every generating slot, then prompt tokens of the
  slots processing prompts, in slot order, up to n_batch; llama_decode runs it in ubatches of n_ubatch
  tokens (each a forward pass that reads the weights again), and tokens are sampled at the end.
- The server loop (`server_queue::start_loop`) takes in every queued task (`launch_slot_with_task`) before
  `update_slots` builds the batch, so requests that arrive while a new one is being taken in join its batch:
  LAUNCH_WINDOW_S, what the stored validation runs show (docs/predict.md: two clients 9 ms apart at c=2,
  each prompt_ms the pair's; the calibration replay explains the short runs with R2 0.82 without a window,
  0.99 with 5 or 10 ms, 0.73 with 2 ms).
The host prompt cache of newer builds (`--cache-ram`), which can restore an evicted prompt, is not modelled.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from servelab.engines.llamacpp.settings import LlamaCppFigures
from servelab.scheduling.core import EngineSetup, Sequence, Speculation, Step, Work

DEFAULT_N_BATCH = 2048
DEFAULT_N_UBATCH = 512
SLOT_PROMPT_SIMILARITY = 0.10
LAUNCH_WINDOW_S = 0.005


@dataclass(frozen=True)
class SlotSettings:
    slots: int
    context_per_slot: int
    n_batch: int = DEFAULT_N_BATCH
    n_ubatch: int = DEFAULT_N_UBATCH
    similarity: float = SLOT_PROMPT_SIMILARITY
    speculation: Speculation | None = None


@dataclass
class _Slot:
    index: int
    cached: tuple[int, ...] = ()  # the tokens whose KV the slot holds
    seq: Sequence | None = None
    last_used: int = -1  # order of release (least recently used first)


class Slots:
    launch_window_s = LAUNCH_WINDOW_S

    def __init__(self, settings: SlotSettings) -> None:
        self.settings = settings
        self.slots = [_Slot(i) for i in range(settings.slots)]
        self.queue: deque[Sequence] = deque()
        self._released = 0

    def add(self, seq: Sequence) -> str | None:
        most = seq.prompt_len + seq.request.output_tokens
        if most > self.settings.context_per_slot:
            return (
                f"the request exceeds the available context size ({most} tokens, a slot holds "
                f"{self.settings.context_per_slot})"
            )
        self.queue.append(seq)
        return None

    def has_work(self) -> bool:
        return bool(self.queue) or any(s.seq is not None for s in self.slots)

    def finished(self, seq: Sequence) -> None:
        slot = next(s for s in self.slots if s.seq is seq)
        slot.cached = seq.request.prompt  # generated tokens are cached too, but no later prompt shares them
        slot.seq, slot.last_used = None, self._released
        self._released += 1

    def steady(self, step: Step) -> int:
        busy = [s.seq for s in self.slots if s.seq is not None]
        works = step.works
        if len(step.passes) != 1 or len(works) != len(busy) or any(w.new != 1 or w.verify for w in works):
            return 0
        if any(not q.decoding for q in busy) or (self.queue and len(busy) < len(self.slots)):
            return 0
        return max(0, min(q.request.output_tokens - q.generated for q in busy) - 1)

    def schedule(self) -> Step | None:
        while self.queue and any(s.seq is None for s in self.slots):
            self._assign(self.queue.popleft())
        busy = [s.seq for s in self.slots if s.seq is not None]
        spec = self.settings.speculation
        works = [Work(q, 1, q.computed, spec.gamma if spec else 0) for q in busy if q.decoding]
        room = self.settings.n_batch - sum(w.new + w.verify for w in works)
        for seq in (q for q in busy if not q.decoding):
            if room <= 0:
                break
            new = min(seq.pending, room)
            works.append(Work(seq, new, seq.computed))
            room -= new
        return Step(ubatches(works, self.settings.n_ubatch)) if works else None

    def _assign(self, seq: Sequence) -> None:
        idle = [s for s in self.slots if s.seq is None]
        prompt = seq.request.prompt
        best = max(idle, key=lambda s: (common_prefix(s.cached, prompt), -s.index))
        shared = common_prefix(best.cached, prompt)
        if not shared or shared / max(1, len(prompt)) <= self.settings.similarity:
            best = min(idle, key=lambda s: (s.last_used, s.index))
            shared = common_prefix(best.cached, prompt)
        reuse = min(shared, len(prompt) - 1)  # at least one prompt token is evaluated
        best.seq, best.cached = seq, prompt[:reuse]
        seq.computed = seq.cached = reuse


def common_prefix(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def ubatches(works: list[Work], size: int) -> tuple[tuple[Work, ...], ...]:
    """The batch cut into forward passes of at most `size` tokens; a prompt chunk is split where it crosses
    one, a decode with drafts stays whole."""
    passes: list[tuple[Work, ...]] = []
    current: list[Work] = []
    room = size
    for w in works:
        if w.verify:
            if room < w.new + w.verify and current:
                passes.append(tuple(current))
                current, room = [], size
            current.append(w)
            room -= w.new + w.verify
            continue
        new, context = w.new, w.context
        while new > 0:
            if room <= 0:
                passes.append(tuple(current))
                current, room = [], size
            take = min(new, room)
            current.append(Work(w.seq, take, context))
            new, context, room = new - take, context + take, room - take
    if current:
        passes.append(tuple(current))
    return tuple(passes)


def scheduler(setup: EngineSetup[LlamaCppFigures]) -> Slots:
    """The slots the plan sets up (its figures: n_parallel, n_ctx_per_slot, n_batch, n_ubatch; a CPU plan leaves
    the batches at llama-server's defaults)."""
    f = setup.figures
    n_batch = f.n_batch or DEFAULT_N_BATCH
    return Slots(
        SlotSettings(
            slots=f.n_parallel,
            context_per_slot=f.n_ctx_per_slot,
            n_batch=n_batch,
            n_ubatch=min(n_batch, f.n_ubatch or DEFAULT_N_UBATCH),
            speculation=setup.speculation,
        )
    )

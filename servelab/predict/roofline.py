"""The time of one engine step from the roofline (pure): bytes over effective bandwidth, FLOPs over effective
compute, whichever is longer, plus the tensor-parallel all-reduces and per-step / per-token overheads.

bytes of a pass = weights read (MoE: the union of the experts its tokens route to, sizing/speed.py
                  `weight_read_bytes`) + for every sequence the KV of its context and new tokens
                  (full layers x tokens, sliding layers x min(tokens, window)) + its recurrent state, read and written
FLOPs of a pass = tokens x 2 x (active params - output head) + logits x 2 x output head
                  + attention: 4 x width x new x (context + new / 2) (causal); logits are computed only where
                  a token is sampled: a prompt's last position, each decoded token, every verified draft
                  (vLLM `logits_indices`, llama.cpp `batch.logits`, sglang's LogitsProcessor on the last token)
The figures are per GPU (`Roofline` is built for one tensor-parallel rank, servelab/predict/machine.py).
`AchievedRates` holds what a calibration replaces: bandwidth, compute and the two overheads, and where a calibration
found prompts faster per FLOP than decodes, a prefill compute for prompt tokens' FLOPs (`Work.prompt`).

Batched passes on a CPU (`AchievedRates.batched_bandwidth_bytes_s`, set for engines whose CPU kernels switch path at
two tokens, `Engine.cpu_batched_path`): a one-token pass is the max above, a pass of two or more tokens streams
the weights and computes in turn: bytes / batched bandwidth + FLOPs / compute (llama.cpp's paths, with their
source, in engines/llamacpp/engine.py and docs/predict.md). A CPU engine's decode attention
(`Roofline.decode_attention_ratio`, `Engine.cpu_decode_attention`) leaves the max: its FLOPs at compute x ratio,
added to the pass.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from servelab.scheduling.core import Speculation, Step, Work


@dataclass(frozen=True, kw_only=True)
class AchievedRates:
    """Achieved figures of one machine x engine x weight format: the planner's peak x its sourced efficiency
    until a calibration profile gives measured ones (`source` says which)."""

    bandwidth_bytes_s: float
    flops_s: float
    step_overhead_s: float = 0.0  # per engine iteration (scheduling, sampling, launch)
    token_overhead_s: float = 0.0  # per token in the step
    source: str = "plan"
    batched_bandwidth_bytes_s: float | None = None  # passes of >= 2 tokens: bytes / this + FLOPs / compute
    prefill_flops_s: float | None = None  # prompt tokens' FLOPs (None: at `flops_s`, as the plan prices them)
    # the GPU step model (predict/stepmodel.py, fitted to the public corpus); None / 0 / 1: as above
    kv_bandwidth_bytes_s: float | None = None  # KV-cache and recurrent-state bytes (None: at the weights')
    attention_flops_s: float | None = None  # attention FLOPs (None: at the matmuls' compute)
    pass_overhead_s: float = 0.0  # per forward pass: layers x kernel launches (graph replay or eager)
    allreduce_scale: float = 1.0  # x the interconnect model's all-reduce time (plan/parallel.py)

    @property
    def split(self) -> bool:
        """KV bytes or attention FLOPs priced apart from the weights and matmuls (the step model)."""
        return self.kv_bandwidth_bytes_s is not None or self.attention_flops_s is not None

    def compute_s(self, flops: float, prompt_flops: float = 0.0) -> float:
        """`flops` FLOPs of which `prompt_flops` are prompt tokens' (at the prefill compute where it is set)."""
        if self.prefill_flops_s is None:
            return flops / self.flops_s
        return (flops - prompt_flops) / self.flops_s + prompt_flops / self.prefill_flops_s

    def pass_time(
        self,
        tokens: int,
        memory_b: float,
        flops: float,
        prompt_flops: float = 0.0,
        apart_flops: float = 0.0,
        apart_ratio: float = 0.0,
        kv_b: float = 0.0,
        attention_flops: float = 0.0,
    ) -> float:
        """One pass of `tokens` tokens reading `memory_b` bytes and doing `flops` FLOPs (`prompt_flops` of
        them for prompt tokens; `apart_flops` of them decode attention run after the rest at compute x
        `apart_ratio`, Roofline.decode_attention_ratio). `kv_b` of the bytes (KV, state) and `attention_flops`
        of the FLOPs are priced at their own figures where the step model sets them (and there `prompt_flops` is
        the prompt tokens' matmul FLOPs, at the prefill compute); its per-pass overhead is added."""
        rest = flops - apart_flops
        if self.split:
            return (
                self._split_pass(memory_b, rest, kv_b, attention_flops, prompt_flops) + self.pass_overhead_s
            )
        if self.batched_bandwidth_bytes_s is not None and tokens >= 2:
            seconds = memory_b / self.batched_bandwidth_bytes_s + self.compute_s(rest, prompt_flops)
        else:
            seconds = max(memory_b / self.bandwidth_bytes_s, self.compute_s(rest, prompt_flops))
        seconds += self.pass_overhead_s
        return seconds + (apart_flops / (self.flops_s * apart_ratio) if apart_flops else 0.0)

    def _split_pass(
        self, memory_b: float, flops: float, kv_b: float, attention_flops: float, prompt_matmul: float = 0.0
    ) -> float:
        """max(weights / bandwidth + KV / KV bandwidth, decode matmul FLOPs / compute + prompt matmul FLOPs /
        prefill compute + attention / attention compute): the step model's pass on a GPU (no CPU kernel paths).
        Here `prompt_matmul` is the prompt tokens' matmul FLOPs, their attention left out (Roofline.pass_s)."""
        kv_bw = self.kv_bandwidth_bytes_s or self.bandwidth_bytes_s
        attention_fl = self.attention_flops_s or self.flops_s
        memory_s = (memory_b - kv_b) / self.bandwidth_bytes_s + kv_b / kv_bw
        decode = flops - attention_flops - prompt_matmul
        compute_s = decode / self.flops_s + attention_flops / attention_fl
        if prompt_matmul:
            compute_s += prompt_matmul / (self.prefill_flops_s or self.flops_s)
        return max(memory_s, compute_s)


@dataclass(frozen=True, kw_only=True)
class Roofline:
    weight_bytes: Callable[[int], float]  # weights one pass of N tokens reads (per GPU)
    kv_full_bytes_per_token: float  # per GPU
    kv_sliding_bytes_per_token: float
    sliding_window: int  # 0: no sliding layers
    state_bytes: float  # recurrent state of one sequence (per GPU)
    flops_per_token: float  # 2 x active params (per GPU), the output head included
    attention_width_full: float  # query heads x head dim over full layers (per GPU)
    attention_width_sliding: float
    rates: AchievedRates
    allreduce_s: Callable[[int], float] = lambda tokens: 0.0  # tensor parallel: all-reduces of one pass
    head_flops_per_token: float = 0.0  # 2 x output head params (per GPU): paid by positions that give logits
    # a CPU engine's decode attention: run after the pass's matmuls at this fraction of the compute figure, its
    # time added to the pass (Engine.cpu_decode_attention); 0: inside the max with the rest, as on a GPU
    decode_attention_ratio: float = 0.0

    def kv_bytes(self, tokens: int) -> float:
        sliding = min(tokens, self.sliding_window) if self.sliding_window else tokens
        return self.kv_full_bytes_per_token * tokens + self.kv_sliding_bytes_per_token * sliding

    def pass_bytes(self, works: Sequence[Work]) -> float:
        tokens = sum(w.new + w.verify for w in works)
        per_sequence = sum(self.kv_bytes(w.context + w.new + w.verify) + 2 * self.state_bytes for w in works)
        return self.weight_bytes(tokens) + per_sequence

    def pass_flops(self, works: Sequence[Work]) -> float:
        body = self.flops_per_token - self.head_flops_per_token
        return sum(
            (w.new + w.verify) * body + _logits(w) * self.head_flops_per_token + self._attention_flops(w)
            for w in works
        )

    def _attention_flops(self, w: Work) -> float:
        """One sequence's attention in a pass: 4 x width x new x (context + new / 2), sliding layers capped."""
        n = w.new + w.verify
        attended = w.context + n / 2
        window = self.sliding_window or attended
        return (
            n
            * 4
            * (self.attention_width_full * attended + self.attention_width_sliding * min(attended, window))
        )

    def decode_attention_flops(self, works: Sequence[Work]) -> float:
        """The attention FLOPs of the decodes (not prompts) in a pass, where they are priced apart
        (`decode_attention_ratio`); 0 otherwise."""
        if not self.decode_attention_ratio:
            return 0.0
        return sum(self._attention_flops(w) for w in works if not w.prompt)

    def prompt_flops(self, works: Sequence[Work]) -> float:
        """The share of `pass_flops` that computes prompt tokens (`Work.prompt`)."""
        return self.pass_flops([w for w in works if w.prompt])

    def prompt_matmul_flops(self, works: Sequence[Work]) -> float:
        """The prompt tokens' FLOPs of a pass without their attention (the step model prices them apart)."""
        prompts = [w for w in works if w.prompt]
        return self.pass_flops(prompts) - sum(self._attention_flops(w) for w in prompts) if prompts else 0.0

    def pass_s(self, works: Sequence[Work]) -> float:
        """One forward pass: the longer of its memory and compute time, plus its all-reduces."""
        if not works:
            return 0.0
        if self.rates.split and not self.sliding_window:
            return self._split_pass_s(works)
        return self._pass_s(works)

    def _pass_s(self, works: Sequence[Work]) -> float:
        """`pass_s` by its helpers, one sum at a time (every rate, sliding layers too)."""
        e = self.rates
        if self.sliding_window:  # per sequence: the window caps each one's KV and attention
            tokens = sum(w.new + w.verify for w in works)
            memory_b, flops = self.pass_bytes(works), self.pass_flops(works)
            prompt = self.prompt_flops(works) if e.prefill_flops_s is not None else 0.0
        else:  # the same sums in one loop (the emulator's hot path)
            tokens = kv_tokens = 0
            attended = 0.0
            for w in works:
                n = w.new + w.verify
                tokens += n
                kv_tokens += w.context + n
                attended += n * (w.context + n / 2)
            memory_b = self.weight_bytes(tokens) + self.kv_full_bytes_per_token * kv_tokens
            memory_b += 2 * self.state_bytes * len(works)
            flops = self._flops(tokens, attended, sum(map(_logits, works)))
            prompt = 0.0
            if e.prefill_flops_s is not None:
                prompts = [w for w in works if w.prompt]
                prompt = self._flops(
                    sum(w.new for w in prompts),
                    sum(w.new * (w.context + w.new / 2) for w in prompts),
                    sum(map(_logits, prompts)),
                )
        apart = self.decode_attention_flops(works)
        if e.split:  # the step model: KV bytes, attention and prompt matmul FLOPs at their own figures
            kv_b = memory_b - self.weight_bytes(tokens)
            attention = sum(self._attention_flops(w) for w in works)
            prompt = self.prompt_matmul_flops(works) if e.prefill_flops_s is not None else 0.0
            seconds = e.pass_time(
                tokens, memory_b, flops, prompt, apart, self.decode_attention_ratio, kv_b, attention
            )
            return seconds + self.allreduce_s(tokens) * e.allreduce_scale
        return e.pass_time(
            tokens, memory_b, flops, prompt, apart, self.decode_attention_ratio
        ) + self.allreduce_s(tokens)

    def _split_pass_s(self, works: Sequence[Work]) -> float:
        """`pass_s` under the step model without sliding layers (the fit-priced emulator's hot path): its sums
        over the works (tokens, KV tokens, attended pairs, logits, attention FLOPs, the prompts' FLOPs and
        their attention) in one loop, each term as `pass_s`'s own helpers write it and added in the same order,
        so the same floats (tests/unit/test_predict_fast_paths.py holds them equal)."""
        e = self.rates
        body = self.flops_per_token - self.head_flops_per_token
        head = self.head_flops_per_token
        full, sliding = self.attention_width_full, self.attention_width_sliding
        prefill = e.prefill_flops_s is not None
        tokens = kv_tokens = logits = 0
        attended = 0.0
        attention: float = 0  # as sum() starts
        prompt_flops: float = 0
        prompt_attention: float = 0
        prompts = 0
        for w in works:
            verify, context = w.verify, w.context
            n = w.new + verify
            tokens += n
            kv_tokens += context + n
            attended += n * (context + n / 2)
            if verify:
                sampled = verify + 1
            else:
                sampled = 1 if context + w.new >= w.seq.tokens else 0
            logits += sampled
            pairs = context + n / 2  # _attention_flops: no window, so min(pairs, window) is pairs
            flops_w = n * 4 * (full * pairs + sliding * pairs)
            attention += flops_w
            if prefill and not verify and (w.new > 1 or w.seq.generated == 0):  # Work.prompt
                prompts += 1
                prompt_flops += n * body + sampled * head + flops_w
                prompt_attention += flops_w
        weights = self.weight_bytes(tokens)
        memory_b = weights + self.kv_full_bytes_per_token * kv_tokens
        memory_b += 2 * self.state_bytes * len(works)
        flops = self._flops(tokens, attended, logits)
        apart = self.decode_attention_flops(works)
        kv_b = memory_b - weights
        prompt = prompt_flops - prompt_attention if prompts else 0.0
        seconds = e.pass_time(
            tokens, memory_b, flops, prompt, apart, self.decode_attention_ratio, kv_b, attention
        )
        return seconds + self.allreduce_s(tokens) * e.allreduce_scale

    def _flops(self, tokens: int, attended: float, logits: int) -> float:
        """FLOPs of `tokens` tokens attending `attended` token pairs in all, `logits` of them sampled (no
        sliding layers)."""
        head = self.head_flops_per_token
        flops = tokens * self.flops_per_token
        if head:
            flops -= (tokens - logits) * head
        return flops + 4 * self.attention_width_full * attended

    def repeated_decode_s(self, step: Step, count: int) -> list[float] | None:
        """The times of `count` more steps like `step` (one pass of plain decodes), each sequence one token
        further than in the one before; None when the step is not of that kind (the emulator's fast path)."""
        if len(step.passes) != 1 or self.sliding_window:
            return None
        works = step.passes[0]
        if any(w.new != 1 or w.verify for w in works):
            return None
        e, n = self.rates, len(works)
        if e.split:
            return self._repeated_split(works, count)
        context = sum(w.context for w in works)
        memory0 = (
            self.weight_bytes(n) + self.kv_full_bytes_per_token * (context + n) + 2 * self.state_bytes * n
        )
        flops0 = n * self.flops_per_token + 4 * self.attention_width_full * (context + n / 2)
        memory1, flops1 = self.kv_full_bytes_per_token * n, 4 * self.attention_width_full * n
        fixed = self.allreduce_s(n) + e.step_overhead_s + e.token_overhead_s * n
        bw, fl = e.bandwidth_bytes_s, e.flops_s
        attention1 = 0.0
        if self.decode_attention_ratio:  # every work here decodes: its attention priced apart
            slow = fl * self.decode_attention_ratio
            attention0 = 4 * self.attention_width_full * (context + n / 2)
            flops0, attention1 = flops0 - attention0, flops1 / slow
            fixed += attention0 / slow
            flops1 = 0.0
        if e.batched_bandwidth_bytes_s is not None and n >= 2:
            bb = e.batched_bandwidth_bytes_s
            return [
                (memory0 + memory1 * j) / bb + (flops0 + flops1 * j) / fl + fixed + attention1 * j
                for j in range(1, count + 1)
            ]
        return [
            max((memory0 + memory1 * j) / bw, (flops0 + flops1 * j) / fl) + fixed + attention1 * j
            for j in range(1, count + 1)
        ]

    def _repeated_split(self, works: Sequence[Work], count: int) -> list[float]:
        """`repeated_decode_s` under the step model: `AchievedRates._split_pass`'s sums for every step at once, in
        its order of operations (the same floats as pricing each step alone)."""
        e, n = self.rates, len(works)
        context = sum(w.context for w in works)
        weights = self.weight_bytes(n)
        state = 2 * self.state_bytes * n
        fixed = self.allreduce_s(n) * e.allreduce_scale + e.step_overhead_s + e.token_overhead_s * n
        flops = n * self.flops_per_token
        j = np.arange(1, count + 1, dtype=float)
        kv_b = self.kv_full_bytes_per_token * (context + n * (j + 1)) + state
        attention = 4 * self.attention_width_full * (context + n * j + n / 2)
        memory_b = weights + kv_b
        kv_bw = e.kv_bandwidth_bytes_s or e.bandwidth_bytes_s
        attention_fl = e.attention_flops_s or e.flops_s
        memory_s = (memory_b - kv_b) / e.bandwidth_bytes_s + kv_b / kv_bw
        decode = (flops + attention) - attention - 0.0
        compute_s = decode / e.flops_s + attention / attention_fl
        seconds: list[float] = ((np.maximum(memory_s, compute_s) + e.pass_overhead_s) + fixed).tolist()
        return seconds

    def step_s(self, step: Step, speculation: Speculation | None = None) -> float:
        """A whole iteration: its passes, the draft model's steps when it verifies drafts, the overheads."""
        seconds = sum(self.pass_s(p) for p in step.passes)
        drafting = [w for w in step.works if w.verify] if speculation is not None else []
        if drafting and speculation is not None:
            one_token = [Work(w.seq, 1, w.context) for w in drafting]
            seconds += speculation.gamma * speculation.draft_cost * self.pass_s(one_token)
        e = self.rates
        return seconds + e.step_overhead_s + e.token_overhead_s * step.tokens


def _logits(w: Work) -> int:
    """Positions of this work whose logits are computed: every verified draft and the one after, else one
    when the work reaches the sequence's last known token (a prompt's end, a decode), none mid-prompt."""
    if w.verify:
        return w.verify + 1
    return 1 if w.context + w.new >= w.seq.tokens else 0

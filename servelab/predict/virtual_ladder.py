"""A bench ladder in virtual time: the same BenchConfig, workload and level statistics as `servelab bench`,
with the emulated engine in place of a server (pure: no clock, no I/O).

Closed loop: `concurrency` clients, each sends its next prompt CLIENT_TURNAROUND_S after its previous answer
ends (warm-up first, as `bench/level.py` takes them). Open loop: warm-up one at a time, then the seeded absolute schedule
(bench/schedule.py). Each level (and repeat) starts a fresh engine; its warm-up fills the caches as on a real
server. Levels follow each other on one virtual clock, a second apart.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from servelab.bench.config import BenchConfig
from servelab.bench.level_counts import level_prompts, level_slots, open_loop_arrivals, warmup_requests
from servelab.bench.metrics import mark_eviction
from servelab.bench.result import BenchResult, TargetResult
from servelab.bench.schedule import arrival_offsets_ns
from servelab.bench.summary import pool_repeats, summarize_level
from servelab.bench.workloads import Prompt
from servelab.predict.bands import predicted_figures
from servelab.predict.emulator import Outcome, emulate
from servelab.predict.machine import EmulatedEngine
from servelab.predict.words import WordTokenizer
from servelab.results.level_key import Level
from servelab.results.records import RequestRecord
from servelab.results.stats import LevelStats, LevelSummary
from servelab.scheduling.core import Request

LEVEL_GAP_NS = 1_000_000_000
# A client's next request reaches the engine after its previous answer's last chunk by the client's and the
# server's handling (medians of the stored runs behind docs/predict.md's validation: 3.3 ms with llama-server,
# 0.9 ms with vLLM). More than zero is what matters: a busy engine starts its next step the moment the last one
# ends, so the request waits for that step, as on a real server, instead of joining it.
CLIENT_TURNAROUND_S = 0.001


@dataclass
class PredictedLevel:
    """One level-repeat: its records and its `LevelSummary` (always valid: no client to fall behind)."""

    records: list[RequestRecord]
    result: LevelSummary


@dataclass
class _Job:
    prompt: Prompt
    phase: str
    intended_s: float | None = None


class _Load:
    """The requests of one level: who sends what when (closed or open loop)."""

    def __init__(self, config: BenchConfig, slots: int, prompts: list[Prompt], tokenizer: WordTokenizer):
        self.config, self.slots, self.prompts, self.tokenizer = config, slots, prompts, tokenizer
        self.warmup = warmup_requests(config, slots)
        self.pool = max(1, len(prompts) - self.warmup)
        self.jobs: dict[int, _Job] = {}
        self.next_index = self.measured = self.errors = 0
        self.first_measured_s: float | None = None

    def _request(self, index: int, at_s: float, phase: str, intended_s: float | None = None) -> Request:
        at = index if index < self.warmup else self.warmup + (index - self.warmup) % self.pool
        prompt = self.prompts[at]
        self.jobs[index] = _Job(prompt, phase, intended_s)
        return Request(index, at_s, self.tokenizer.prompt_ids(prompt), prompt.output_tokens)

    def take(self, at_s: float) -> Request | None:
        """The next closed-loop request at `at_s`, or None when the level is over (bench/level.py take)."""
        index = self.next_index
        if index < self.warmup:
            self.next_index += 1
            return self._request(index, at_s, "warmup")
        first = self.first_measured_s if self.first_measured_s is not None else at_s
        if not self.config.stop.may_start(self.measured, round((at_s - first) * 1e9), self.errors):
            return None
        self.first_measured_s = first
        self.next_index += 1
        self.measured += 1
        return self._request(index, at_s, "measure")

    def closed_start(self) -> list[Request]:
        return [r for r in (self.take(0.0) for _ in range(self.slots)) if r is not None]

    def closed_next(self, outcome: Outcome, t: float) -> Iterable[Request]:
        self._count(outcome)
        nxt = self.take(t + CLIENT_TURNAROUND_S)
        return () if nxt is None else (nxt,)

    def open_start(self) -> list[Request]:
        if self.warmup:
            self.next_index = 1
            return [self._request(0, 0.0, "warmup")]
        return self._schedule(0.0)

    def open_next(self, outcome: Outcome, t: float) -> Iterable[Request]:
        self._count(outcome)
        if self.jobs[outcome.seq.request.rid].phase != "warmup":
            return ()
        if self.next_index < self.warmup:
            self.next_index += 1
            return (self._request(self.next_index - 1, t, "warmup"),)
        return self._schedule(t)

    def _schedule(self, t0: float) -> list[Request]:
        c = self.config
        offsets = arrival_offsets_ns(
            c.rate or 1.0, open_loop_arrivals(c), burstiness=c.burstiness, seed=c.seed
        )
        out = []
        for offset in offsets:
            at = t0 + offset / 1e9
            out.append(self._request(self.next_index, at, "measure", at))
            self.next_index += 1
        return out

    def _count(self, outcome: Outcome) -> None:
        if self.jobs[outcome.seq.request.rid].phase == "measure" and outcome.refused is not None:
            self.errors += 1


def predict_level(
    engine: EmulatedEngine,
    config: BenchConfig,
    level: Level,
    slots: int,
    repeat: int,
    prompts: list[Prompt],
    base_ns: int,
    tokenizer: WordTokenizer,
) -> PredictedLevel:
    """One repeat of one level, its records stamped from `base_ns` on the virtual clock."""
    load = _Load(config, slots, prompts, tokenizer)
    if config.rate is None:
        start, on_finish = load.closed_start(), load.closed_next
    else:
        start, on_finish = load.open_start(), load.open_next
    outcomes = emulate(
        engine.new_scheduler(), engine.roofline, start, on_finish, speculation=engine.speculation
    )
    records = sorted(
        (_record(o, load.jobs[o.seq.request.rid], level, repeat, base_ns) for o in outcomes),
        key=lambda r: (r.sent_ns, r.request_index),
    )
    stats = summarize_level(records, level, config.slo)
    return PredictedLevel(records, _result(engine, stats))


def _result(engine: EmulatedEngine, stats: LevelStats) -> LevelSummary:
    """A predicted level's result, its figures' bands and provenance kept with it where the pricing is known."""
    banded = {} if engine.pricing is None else predicted_figures(stats, engine.pricing)
    return LevelSummary(stats, valid=True, client={}, predicted=banded)


def _record(outcome: Outcome, job: _Job, level: Level, repeat: int, base_ns: int) -> RequestRecord:
    seq, prompt = outcome.seq, job.prompt
    sent = base_ns + round(seq.request.arrival_s * 1e9)
    common: dict[str, Any] = dict(
        target_index=0,
        level=level.label,
        repeat=repeat,
        request_index=prompt.index,
        phase=job.phase,
        sent_ns=sent,
        max_tokens=prompt.output_tokens,
        prompt_tokens=seq.prompt_len,
        intended_ns=None if job.intended_s is None else base_ns + round(job.intended_s * 1e9),
        expected_prompt_tokens=seq.prompt_len,
        expected_cached_tokens=prompt.expected_cached_tokens or None,
        request_id=f"predict-{level.label}-{repeat}-{seq.request.rid}",
    )
    if outcome.refused is not None:
        return RequestRecord(
            status="error",
            end_ns=sent,
            error_kind="http_4xx",
            http_status=400,
            error=outcome.refused,
            **common,
        )
    chunks = stamps_ns(seq.token_times, base_ns)
    record = RequestRecord(
        status="ok",
        end_ns=chunks[-1],
        first_token_ns=chunks[0],
        output_tokens=seq.generated,
        tokens_source="server",
        finish_reason="length",
        cached_prompt_tokens=seq.cached,
        chunk_ns=chunks,
        chunk_tokens=array("i", seq.token_counts),
        chunk_tokens_source="usage",
        **common,
    )
    return mark_eviction(record)


def stamps_ns(times_s: list[float], base_ns: int) -> array:
    """`base_ns + round(t * 1e9)` for each time, as array("q"): numpy's rint rounds half to even as Python's
    round does, on the same float products (a level's hot loop)."""
    out = array("q")
    if times_s:
        out.frombytes((np.rint(np.asarray(times_s, dtype=float) * 1e9).astype(np.int64) + base_ns).tobytes())
    return out


def predict_ladder(
    engine: EmulatedEngine,
    config: BenchConfig,
    prompts: list[Prompt],
    tokenizer: WordTokenizer,
    *,
    label: str,
    model: str,
    on_level: Any = None,
) -> tuple[BenchResult, list[list[RequestRecord]]]:
    """Every level of `config` against the emulated engine: the result as `servelab bench` returns it, and
    each level-repeat's records (in order). `prompts` were built with `tokenizer` (bench/workloads.py
    build_prompts). `on_level(records, level, repeat, result)` sees each repeat."""
    target = TargetResult(label, engine.engine, model, engine.context)
    base, at, every = 0, 0, []
    for level, slots in zip(config.levels, level_slots(config), strict=True):
        repeats = []
        for rep in range(config.repeat):
            count = level_prompts(config, slots)
            done = predict_level(engine, config, level, slots, rep, prompts[at : at + count], base, tokenizer)
            at += count
            base = max((r.end_ns for r in done.records), default=base) + LEVEL_GAP_NS
            repeats.append(done)
            every.append(done.records)
            if on_level is not None:
                on_level(done.records, level, rep, done.result)
        stats = pool_repeats([(d.records, d.result.stats) for d in repeats], level, config.slo)
        target.levels.append(_result(engine, stats))
    return BenchResult(None, partial=False, targets=[target]), every

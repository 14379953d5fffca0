"""Fit the emulator's `AchievedRates` figures to measured runs (pure: records in, figures and residuals out).

The roofline prices a step as  Σ passes max(bytes / bandwidth, FLOPs / compute) + all-reduces
+ per-step overhead + per-token overhead x tokens  (servelab/predict/roofline.py). Which steps a real server ran
is not recorded, so each level-repeat of a run is *replayed*: its requests enter the engine's emulated scheduler
at their measured send times (prompt and output lengths as the server counted them), and the replay lists every
step with what it computed. A measured interval then equals the sum of the steps inside it:
- a per-token gap (between two streamed chunks) = the steps after the chunk's step up to the next one's;
- a prefill = the steps from the request's admission to its first token: llama.cpp's `timings.prompt_ms` where the
  server reported it (no queueing, no HTTP in it), else TTFT less the replay's wait before admission.
With each pass on the memory or the compute side of its max, every interval is linear in (1/bandwidth,
1/compute, step overhead, token overhead): a non-negative least squares on relative error (each kind of
interval weighted equally in total) gives the four figures; the sides are re-chosen and the replay re-run with
the new figures until they stop moving. On records the emulator made itself the fit returns its figures.
Where the engine's CPU backend prices passes of >= 2 tokens as bytes / batched bandwidth + FLOPs / compute
(`AchievedRates.batched_bandwidth_bytes_s`, llama.cpp), that pass is linear in (1/batched bandwidth, 1/compute) and
the fit has a fifth figure.

Requests the server found in its prompt cache (cached tokens reported, or a shared prefix in the workload)
give no prefill interval: the replay does not know which cache they hit. Speculative decoding is not fitted.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields, replace
from statistics import median

import numpy as np

from servelab.errors import ConfigError
from servelab.predict.emulator import Outcome, emulate
from servelab.predict.machine import EmulatedEngine
from servelab.predict.roofline import AchievedRates, Roofline
from servelab.results.records import RequestRecord
from servelab.scheduling.core import Request, Speculation, Step

ARRIVAL_SLACK_S = 1e-6  # a request sent at a step's end (ns-rounded) joins that step boundary
CLOSED_LOOP_S = 0.05  # a request sent this soon after another's stream ended is that client's next one
OUTER_ROUNDS = 8  # replays with re-fitted figures
SIDE_ROUNDS = 20  # memory/compute side re-assignments per replay
CONVERGED = 1e-9  # relative change of every figure that ends the rounds
MIN_INTERVALS = 8
READ_TOGETHER_NS = 100_000  # chunks closer than this came in one read (no engine step is as short)
COALESCED = 0.2  # a chunk this soon (x the request's median gap) after another was read with it
PARSIMONY = 0.01  # relative cost a figure more must save to be fitted
TRIM = 1.0  # intervals the replay misses by more than this (relative) sit out the solve
# x: 1/bandwidth, 1/compute, step overhead, token overhead, 1/batched bandwidth, 1/prefill compute - 1/compute
BATCHED, PREFILL = 4, 5


@dataclass(frozen=True, kw_only=True)
class LevelFit:
    """How the fitted figures explain one level of the runs: medians measured vs replayed."""

    level: str
    requests: int
    ttft_p50_s: float
    ttft_p50_fit_s: float
    tpot_p50_s: float
    tpot_p50_fit_s: float
    gap_error: float  # median |relative residual| of its per-token gaps
    prefill_error: float | None  # the same of its prefills (None: none measured)


@dataclass(frozen=True, kw_only=True)
class Calibration:
    rates: AchievedRates
    intervals: int  # measured intervals fitted
    gaps: int
    prefills: int
    r2: float  # of the measured intervals (seconds) by the fitted step sums
    rms_relative: float  # root mean square of (fitted - measured) / measured
    median_relative: float  # median |(fitted - measured) / measured|
    levels: tuple[LevelFit, ...]
    rounds: int


@dataclass(kw_only=True)
class _Pass:
    bytes: float
    flops: float
    fixed_s: float  # all-reduces
    tokens: int = 1
    prompt_flops: float = 0.0  # of `flops`, those of prompt tokens
    apart_flops: float = 0.0  # of `flops`, decode attention priced apart at compute / ratio (CPU engines)
    ratio: float = 0.0


@dataclass
class _StepRow:
    passes: list[_Pass]
    tokens: int


@dataclass(frozen=True, kw_only=True)
class _EmissionRecorder(Roofline):
    """The roofline that also lists each step and which sequences it emits a token for."""

    log: list[_StepRow] = field(default_factory=list)
    emitted: dict[int, list[int]] = field(default_factory=dict)  # request id -> step index per emission
    admitted: dict[int, int] = field(default_factory=dict)  # request id -> first step it is in

    def step_s(self, step: Step, speculation: Speculation | None = None) -> float:
        index = len(self.log)
        passes = []
        for p in step.passes:
            if p:
                tokens = sum(w.new + w.verify for w in p)
                passes.append(
                    _Pass(
                        bytes=self.pass_bytes(p),
                        flops=self.pass_flops(p),
                        fixed_s=self.allreduce_s(tokens),
                        tokens=tokens,
                        prompt_flops=self.prompt_flops(p),
                        apart_flops=self.decode_attention_flops(p),
                        ratio=self.decode_attention_ratio,
                    )
                )
        self.log.append(_StepRow(passes, step.tokens))
        for w in step.works:
            rid = w.seq.request.rid
            self.admitted.setdefault(rid, index)
            if w.seq.computed + w.new >= w.seq.tokens:
                self.emitted.setdefault(rid, []).append(index)
        return super().step_s(step, speculation)


def _recorder(roofline: Roofline, rates: AchievedRates) -> _EmissionRecorder:
    values = {f.name: getattr(roofline, f.name) for f in fields(Roofline)}
    return _EmissionRecorder(**{**values, "rates": rates})


@dataclass(frozen=True, kw_only=True)
class _Interval:
    group: int
    level: str
    kind: str  # "gap" or "prefill"
    measured_s: float
    first: int  # steps first..last (inclusive) of its group's replay
    last: int
    rid: int


@dataclass
class _Replay:
    level: str
    records: list[RequestRecord]  # ok records in send order; index = request id in the replay
    rec: _EmissionRecorder
    arrival_s: list[float]  # when each request joins the replay
    sent_s: list[float]  # when it was sent, on the replay's clock
    end_s: dict[int, list[float]]  # request id -> emulated token times


def group_records(records: Iterable[RequestRecord]) -> dict[tuple[int, str, int], list[RequestRecord]]:
    """The ok records of each (target, level, repeat), in send order."""
    groups: dict[tuple[int, str, int], list[RequestRecord]] = defaultdict(list)
    for r in records:
        if r.status == "ok" and r.first_token_ns is not None and r.output_tokens and len(r.chunk_ns):
            groups[(r.target_index, r.level, r.repeat)].append(r)
    return {k: sorted(v, key=lambda r: (r.sent_ns, r.request_index)) for k, v in groups.items()}


def _replay(
    engine: EmulatedEngine, level: str, records: list[RequestRecord], rates: AchievedRates
) -> _Replay:
    """`records` through the scheduler: a request sent as another's stream ended (a closed-loop client's next
    one) follows that request's replayed end by the same delay; any other enters at its send time."""
    rec = _recorder(engine.roofline, rates)
    t0 = records[0].sent_ns
    sent = [(r.sent_ns - t0) / 1e9 for r in records]
    requests, base = [], 0
    for rid, r in enumerate(records):
        prompt = r.prompt_tokens or r.expected_prompt_tokens or 1
        requests.append(Request(rid, sent[rid], tuple(range(base, base + prompt)), int(r.output_tokens or 1)))
        base += prompt  # unique ids: no prompt shares a prefix with another
    follows = _successors(records)
    arrival = dict(enumerate(sent))
    chained = {rid for nxt in follows.values() for rid, _ in nxt}

    def released(outcome: Outcome, t: float) -> list[Request]:
        out = []
        for rid, delay_s in follows.get(outcome.seq.request.rid, ()):
            arrival[rid] = max(0.0, t + delay_s)
            out.append(replace(requests[rid], arrival_s=arrival[rid]))
        return out

    first = [q for q in requests if q.rid not in chained]
    outcomes = emulate(
        engine.new_scheduler(), rec, first, released, fast=False, join_within_s=ARRIVAL_SLACK_S
    )
    ends = {o.seq.request.rid: list(o.seq.token_times) for o in outcomes if o.refused is None}
    return _Replay(level, records, rec, [arrival[i] for i in range(len(records))], sent, ends)


def _successors(records: list[RequestRecord]) -> dict[int, list[tuple[int, float]]]:
    """For each request, the requests sent within CLOSED_LOOP_S of its last chunk (one each: a client sends
    one request when its previous one ends), with the delay."""
    ends = sorted((int(r.chunk_ns[-1]), rid) for rid, r in enumerate(records))
    used: set[int] = set()
    follows: dict[int, list[tuple[int, float]]] = defaultdict(list)
    for rid, r in enumerate(records):
        best = None
        for end, prev in ends:
            if end > r.sent_ns:
                break
            if prev not in used and prev != rid and r.sent_ns - end <= CLOSED_LOOP_S * 1e9:
                best = (end, prev)
        if best is not None:
            used.add(best[1])
            follows[best[1]].append((rid, (r.sent_ns - best[0]) / 1e9))
    return follows


def _intervals(group: int, replay: _Replay) -> list[_Interval]:
    out: list[_Interval] = []
    for rid, r in enumerate(replay.records):
        steps = replay.rec.emitted.get(rid)
        if not steps or rid not in replay.rec.admitted:
            continue
        if not (r.cached_prompt_tokens or r.expected_cached_tokens):
            prefill = _measured_prefill_s(r)
            if prefill is not None:
                out.append(
                    _Interval(
                        group=group,
                        level=replay.level,
                        kind="prefill",
                        measured_s=prefill,
                        first=replay.rec.admitted[rid],
                        last=steps[0],
                        rid=rid,
                    )
                )
        counts = list(r.chunk_tokens) if len(r.chunk_tokens) == len(r.chunk_ns) else [1] * len(r.chunk_ns)
        chunk_gaps = [b - a for a, b in zip(r.chunk_ns, r.chunk_ns[1:], strict=False)]
        real_gaps = [g for g in chunk_gaps if g >= READ_TOGETHER_NS]
        least_ns = max(READ_TOGETHER_NS, COALESCED * median(real_gaps)) if real_gaps else READ_TOGETHER_NS
        start, start_token = 0, max(1, counts[0])  # the chunk an interval starts at, tokens up to it
        token = start_token
        for k in range(1, len(r.chunk_ns)):
            token += max(1, counts[k])
            if token > len(steps):
                break
            if (
                r.chunk_ns[k] - r.chunk_ns[k - 1] < least_ns
            ):  # read together with the chunk before: one interval
                continue
            first, last = steps[start_token - 1] + 1, steps[token - 1]
            gap = (r.chunk_ns[k] - r.chunk_ns[start]) / 1e9
            if gap > 0 and last >= first:
                out.append(
                    _Interval(
                        group=group,
                        level=replay.level,
                        kind="gap",
                        measured_s=gap,
                        first=first,
                        last=last,
                        rid=rid,
                    )
                )
            start, start_token = k, token
    return out


def _measured_prefill_s(r: RequestRecord) -> float | None:
    timings = r.server_timings or {}
    prompt_ms = timings.get("prompt_ms")
    if isinstance(prompt_ms, int | float) and prompt_ms > 0 and not timings.get("cache_n"):
        return float(prompt_ms) / 1e3
    return None  # TTFT stands in (less the replay's wait), set where the wait is known


def _features(replay: _Replay, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per step, cumulated: the (memory, compute, 1, tokens, batched memory, prompt compute) coefficients with
    each pass on the side `x` puts it (a batched pass, where the engine has that path: its bytes and its FLOPs
    both), and the fixed seconds (all-reduces). A pass's prompt FLOPs count in the compute column as all its
    FLOPs do, and again in the last (1/prefill compute - 1/compute)."""
    batched = _has_batched(x)
    rows = np.zeros((len(replay.rec.log) + 1, len(x)))
    fixed = np.zeros(len(replay.rec.log) + 1)
    for j, step in enumerate(replay.rec.log, start=1):
        mem = comp = prompt = extra = mem_batched = 0.0
        for p in step.passes:
            flops = p.flops - p.apart_flops
            if p.apart_flops:  # after the max, at compute x ratio: a 1/compute coefficient of its own
                comp += p.apart_flops / p.ratio
            if batched and p.tokens >= 2:
                mem_batched += p.bytes
                comp, prompt = comp + flops, prompt + p.prompt_flops
            elif p.bytes * x[0] >= flops * x[1] + p.prompt_flops * x[PREFILL]:
                mem += p.bytes
            else:
                comp, prompt = comp + flops, prompt + p.prompt_flops
            extra += p.fixed_s
        rows[j] = (mem, comp, 1.0, step.tokens, mem_batched, prompt)
        fixed[j] = extra
    return np.cumsum(rows, axis=0), np.cumsum(fixed)


def _has_batched(x: np.ndarray) -> bool:
    """The engine prices batched passes apart (1/batched bandwidth 0: it has no such path)."""
    return bool(x[BATCHED] > 0)


def _system(
    replays: list[_Replay], intervals: list[_Interval], x: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    feats = [_features(r, x) for r in replays]
    a = np.empty((len(intervals), len(x)))
    y = np.empty(len(intervals))
    for i, iv in enumerate(intervals):
        rows, fixed = feats[iv.group]
        a[i] = rows[iv.last + 1] - rows[iv.first]
        y[i] = iv.measured_s - (fixed[iv.last + 1] - fixed[iv.first])
    return a, y


def _weights(intervals: list[_Interval]) -> np.ndarray:
    count: dict[str, int] = defaultdict(int)
    for iv in intervals:
        count[iv.kind] += 1
    return np.array([1.0 / (iv.measured_s * math.sqrt(count[iv.kind])) for iv in intervals])


def nonnegative_lstsq(
    a: np.ndarray,
    y: np.ndarray,
    held: np.ndarray,
    positive: tuple[int, ...] = (0, 1, BATCHED),
    signed: tuple[int, ...] = (PREFILL,),
) -> np.ndarray:
    """min ||a x - y|| with x >= 0 (entries in `signed` of any sign), by trying each set of free entries (6
    unknowns: 64 sets); columns scaled to unit norm first. An entry left out is 0, except those in `positive`
    (1/bandwidth, 1/compute, 1/batched bandwidth), which keep their `held` value: a column the data never
    touches (no pass on the compute side, say), or one the data would drive to zero or below, keeps the figure
    it had. The prefill difference left out is 0: prompt tokens at the compute of the others."""
    scale = np.linalg.norm(a, axis=0)
    touched = scale > 0
    scale[~touched] = 1.0
    scaled = a / scale
    kept = np.isin(np.arange(a.shape[1]), positive)
    base = np.where(kept, held * scale, 0.0)
    candidates = [(float(np.sum((scaled @ base - y) ** 2)), 0, base)]
    for free in itertools.product((True, False), repeat=a.shape[1]):
        cols = [c for c, f in enumerate(free) if f and touched[c]]
        if not cols:
            continue
        x = base.copy()
        x[cols] = 0.0
        sol, *_ = np.linalg.lstsq(scaled[:, cols], y - scaled @ x, rcond=None)
        if any((v < 0 and c not in signed) or (v == 0 and kept[c]) for c, v in zip(cols, sol, strict=True)):
            continue
        x[cols] = sol
        candidates.append((float(np.sum((scaled @ x - y) ** 2)), len(cols), x))
    least = min(c[0] for c in candidates)
    # parsimony: the fewest free figures that explain the data within PARSIMONY of the best (a figure the data
    # cannot tell from another, as a step overhead from the weights' time when every step reads the same, is left)
    _, _, best = min(
        (c for c in candidates if c[0] <= least * (1 + PARSIMONY) + 1e-300), key=lambda c: (c[1], c[0])
    )
    return best / scale


def _to_x(e: AchievedRates) -> np.ndarray:
    batched = 0.0 if e.batched_bandwidth_bytes_s is None else 1 / e.batched_bandwidth_bytes_s
    prefill = 0.0 if e.prefill_flops_s is None else 1 / e.prefill_flops_s - 1 / e.flops_s
    return np.array(
        [1 / e.bandwidth_bytes_s, 1 / e.flops_s, e.step_overhead_s, e.token_overhead_s, batched, prefill]
    )


def _to_rates(x: np.ndarray, source: str) -> AchievedRates:
    batched = float(1 / x[BATCHED]) if _has_batched(x) else None
    prefill = float(1 / (x[1] + x[PREFILL])) if x[PREFILL] != 0 else None
    return AchievedRates(
        bandwidth_bytes_s=float(1 / x[0]),
        flops_s=float(1 / x[1]),
        step_overhead_s=float(x[2]),
        token_overhead_s=float(x[3]),
        source=source,
        batched_bandwidth_bytes_s=batched,
        prefill_flops_s=prefill,
    )


def _fill_ttft_prefills(
    replays: list[_Replay], intervals: list[_Interval], rates: AchievedRates
) -> list[_Interval]:
    """Prefill intervals from TTFT where the server gave no prompt time: TTFT less the replay's wait."""
    out = list(intervals)
    seen = {(iv.group, iv.rid) for iv in intervals if iv.kind == "prefill"}
    for g, replay in enumerate(replays):
        times = _step_times(replay, rates)
        for rid, r in enumerate(replay.records):
            steps, first_s = replay.rec.emitted.get(rid), replay.end_s.get(rid)
            if (g, rid) in seen or not steps or not first_s or rid not in replay.rec.admitted:
                continue
            if r.cached_prompt_tokens or r.expected_cached_tokens or r.first_token_ns is None:
                continue
            start = replay.rec.admitted[rid]
            wait = first_s[0] - replay.arrival_s[rid] - float(sum(times[start : steps[0] + 1]))
            ttft = (r.first_token_ns - r.sent_ns) / 1e9 - max(0.0, wait)
            if ttft > 0:
                out.append(
                    _Interval(
                        group=g,
                        level=replay.level,
                        kind="prefill",
                        measured_s=ttft,
                        first=start,
                        last=steps[0],
                        rid=rid,
                    )
                )
    return out


def _step_times(replay: _Replay, rates: AchievedRates) -> list[float]:
    e = rates
    return [
        sum(
            e.pass_time(p.tokens, p.bytes, p.flops, p.prompt_flops, p.apart_flops, p.ratio) + p.fixed_s
            for p in s.passes
        )
        + e.step_overhead_s
        + e.token_overhead_s * s.tokens
        for s in replay.rec.log
    ]


def fit(
    engine: EmulatedEngine, records: Sequence[RequestRecord], *, source: str = "calibration"
) -> Calibration:
    """The `AchievedRates` figures that best explain `records` (one engine's runs) on `engine`'s scheduler."""
    groups = group_records(records)
    if not groups:
        raise ConfigError("the runs hold no successful streamed requests to calibrate on")
    rates = engine.roofline.rates
    x = _to_x(rates)
    rounds = 0
    for rounds in range(1, OUTER_ROUNDS + 1):
        replays = [_replay(engine, k[1], v, rates) for k, v in groups.items()]
        intervals = [iv for g, r in enumerate(replays) for iv in _intervals(g, r)]
        intervals = _fill_ttft_prefills(replays, intervals, rates)
        if len(intervals) < MIN_INTERVALS:
            raise ConfigError(
                f"the runs give {len(intervals)} measured intervals (at least {MIN_INTERVALS} needed); "
                "calibrate on runs with more requests"
            )
        if rounds == 1:
            x = _initial(replays, intervals, x)
            rates = _to_rates(x, source)
            continue
        new_x = _fit_sides(replays, intervals, x)
        moved = float(np.max(np.abs(new_x - x) / np.maximum(np.abs(x), 1e-30)))
        x, rates = new_x, _to_rates(new_x, source)
        if moved < CONVERGED:
            break
    return _explained(engine, groups, rates, x, rounds)


def explain(
    engine: EmulatedEngine, records: Sequence[RequestRecord], rates: AchievedRates | None = None
) -> Calibration:
    """How well given figures (the engine's own when None) explain `records`, nothing fitted: each level-repeat
    replayed at its measured send times, so clients that did not send in step (a loaded host) are replayed as
    they sent. `Calibration.levels` has the measured and replayed medians per level."""
    groups = group_records(records)
    if not groups:
        raise ConfigError("the runs hold no successful streamed requests to compare with")
    rates = rates or engine.roofline.rates
    return _explained(engine, groups, rates, _to_x(rates), 0)


def _explained(
    engine: EmulatedEngine, groups: dict, rates: AchievedRates, x: np.ndarray, rounds: int
) -> Calibration:
    """The report of `effective` on every level-repeat replayed with it."""
    replays = [_replay(engine, k[1], v, rates) for k, v in groups.items()]
    intervals = [iv for g, r in enumerate(replays) for iv in _intervals(g, r)]
    return _report(replays, _fill_ttft_prefills(replays, intervals, rates), x, rates, rounds)


def _fit_sides(replays: list[_Replay], intervals: list[_Interval], x: np.ndarray) -> np.ndarray:
    """Re-choose each pass's side and solve until the sides stop changing; intervals the replay explains far
    off (by more than TRIM: a prefill the replay put in a gap where the server ran none) sit out the solve."""
    w = _weights(intervals)
    keep = np.ones(len(intervals), dtype=bool)
    for _ in range(SIDE_ROUNDS):
        a, y = _system(replays, intervals, x)
        new_x = nonnegative_lstsq(a[keep] * w[keep, None], y[keep] * w[keep], x)
        if new_x[1] + new_x[PREFILL] <= 0:  # no finite prefill compute explains it: prompts at the others'
            new_x[PREFILL] = 0.0
        rel = np.abs(a @ new_x - y) / np.array([iv.measured_s for iv in intervals])
        keep = rel <= TRIM
        if keep.sum() < max(MIN_INTERVALS, len(intervals) // 2):  # the figures are far off yet: use all
            keep[:] = True
        if np.allclose(new_x, x, rtol=1e-12, atol=0):
            return new_x
        x = new_x
    return x


def _initial(replays: list[_Replay], intervals: list[_Interval], x: np.ndarray) -> np.ndarray:
    """A start that puts the replay's step structure near the measured one: 1/bandwidth from the median token
    gap, 1/compute from the median prefill (each over the coefficient of its side), overheads 0."""
    a, y = _system(replays, intervals, x)
    start = x.copy()
    start[2:4] = 0.0
    start[PREFILL] = 0.0  # prompt tokens at the same compute to begin with
    for col, kind in ((0, "gap"), (1, "prefill")):
        rows = [i for i, iv in enumerate(intervals) if iv.kind == kind and a[i, col] > 0]
        if rows:
            start[col] = float(np.median(y[rows] / a[rows, col]))
    if _has_batched(start):  # batched passes: the gaps they make, less their compute at the start's figure
        rows = [i for i, iv in enumerate(intervals) if iv.kind == "gap" and a[i, BATCHED] > 0]
        left = [(y[i] - a[i, 1] * start[1]) / a[i, BATCHED] for i in rows]
        if left and float(np.median(left)) > 0:
            start[BATCHED] = float(np.median(left))
    return start


def _report(
    replays: list[_Replay], intervals: list[_Interval], x: np.ndarray, rates: AchievedRates, rounds: int
) -> Calibration:
    a, y = _system(replays, intervals, x)
    fitted = a @ x
    measured = np.array([iv.measured_s for iv in intervals])
    fitted_s = fitted + (measured - y)
    rel = (fitted_s - measured) / measured
    ss_tot = float(np.sum((measured - measured.mean()) ** 2))
    r2 = 1.0 - float(np.sum((fitted_s - measured) ** 2)) / ss_tot if ss_tot > 0 else 1.0
    kinds = [iv.kind for iv in intervals]
    return Calibration(
        rates=rates,
        intervals=len(intervals),
        gaps=kinds.count("gap"),
        prefills=kinds.count("prefill"),
        r2=r2,
        rms_relative=float(np.sqrt(np.mean(rel**2))),
        median_relative=float(np.median(np.abs(rel))),
        levels=_levels(replays, intervals, rel),
        rounds=rounds,
    )


def _levels(replays: list[_Replay], intervals: list[_Interval], rel: np.ndarray) -> tuple[LevelFit, ...]:
    errors: dict[tuple[str, str], list[float]] = defaultdict(list)
    for iv, e in zip(intervals, rel, strict=True):
        errors[(iv.level, iv.kind)].append(abs(float(e)))
    by_level: dict[str, list[tuple[RequestRecord, float, list[float]]]] = defaultdict(list)
    for replay in replays:
        for rid, r in enumerate(replay.records):
            times = replay.end_s.get(rid)
            if r.phase == "measure" and times:
                by_level[replay.level].append((r, replay.arrival_s[rid], times))
    out = []
    for level, rows in by_level.items():
        ttft = [(r.first_token_ns - r.sent_ns) / 1e9 for r, _, _ in rows if r.first_token_ns is not None]
        tpot = [_tpot(r) for r, _, _ in rows if r.output_tokens and r.output_tokens > 1]
        fit_ttft = [t[0] - at for _, at, t in rows]
        fit_tpot = [(t[-1] - t[0]) / (len(t) - 1) for _, _, t in rows if len(t) > 1]
        prefill = errors.get((level, "prefill"))
        out.append(
            LevelFit(
                level=level,
                requests=len(rows),
                ttft_p50_s=_med(ttft),
                ttft_p50_fit_s=_med(fit_ttft),
                tpot_p50_s=_med(tpot),
                tpot_p50_fit_s=_med(fit_tpot),
                gap_error=_med(errors.get((level, "gap"), [])),
                prefill_error=None if not prefill else _med(prefill),
            )
        )
    return tuple(out)


def _tpot(r: RequestRecord) -> float:
    end = r.chunk_ns[-1] if len(r.chunk_ns) else r.end_ns
    return (end - (r.first_token_ns or r.sent_ns)) / 1e9 / max(1, (r.output_tokens or 1) - 1)


def _med(values: list[float]) -> float:
    return float(median(values)) if values else math.nan


def with_rates(engine: EmulatedEngine, rates: AchievedRates) -> EmulatedEngine:
    """`engine` priced with other effective figures (a calibration profile's)."""
    return replace(engine, roofline=replace(engine.roofline, rates=rates))

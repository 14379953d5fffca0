"""Each corpus row as the servelab inputs that predict it, and its prediction replayed step by step.

A row becomes a `Setup`: the model (the catalog, or `models.json`: the row's model name -> a catalog id or an
architecture file in `models/` with its Hugging Face config URL), the GPU from the catalog, a plan of the row's
engine, format, KV dtype and tensor parallelism (`plan/make.py`), the roofline of that plan
(`predict/machine.py`) and the step model's regime (`predict/stepmodel.py`). Then `pass_log(setup, model)` runs
the workload the row measured:

- a row of an engine's own benchmark tool (llama-bench, llama-batched-bench: `pp_tok_s` / `tg_tok_s`): the timed
  steps the engine's `bench_replay` says the tool runs (engines/llamacpp/bench_replay.py);
- a serving row (`vllm bench serve`, `sglang.bench_serving` …): the engine's emulated scheduler
  (`Engine.scheduler`) under the client's load: `concurrency` clients in a closed loop (a finished request's
  client sends the next after virtual_ladder.CLIENT_TURNAROUND_S), or arrivals at `request_rate` (Poisson, seeded),
  `num_prompts` requests of the row's prompt / output lengths, no shared prefixes (the random dataset).

A `PassLog` lists every pass's bytes (weights, KV) and FLOPs (matmul, attention), its all-reduce time, each step's
tokens and layers, and each figure as a weighted sum of step times plus idle time (a TTFT the steps from its
arrival to its first token, partial steps by their overlap; a median the middle request or two). With the step
model's parameters the figures follow; with each pass's side of its max fixed they are linear in the
parameters (`predict/corpus/fit.py`).
"""

from __future__ import annotations

import heapq
import json
import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from statistics import median

import numpy as np

from servelab.engines import registry
from servelab.engines.base import BenchWorkload
from servelab.errors import ServelabError
from servelab.hardware.gpus import GPU, find_gpu
from servelab.model.hf_config import spec_from_config
from servelab.model.load import load_model
from servelab.model.spec import ModelSpec
from servelab.plan.make import compute_dtype, make_plan
from servelab.predict.emulator import EngineLoop
from servelab.predict.machine import emulated_engine, roofline
from servelab.predict.roofline import AchievedRates, Roofline
from servelab.predict.stepmodel import Regime, StepModel, regime
from servelab.predict.virtual_ladder import CLIENT_TURNAROUND_S
from servelab.scheduling.core import Request, Sequence, Speculation, Step
from servelab.sizing.types import Plan

from .schema import Measurement

# the figures the harness predicts; the rest of a row's figures are kept, not predicted
TIME_FIGURES = (
    "ttft_ms_median",
    "ttft_ms_mean",
    "tpot_ms_median",
    "tpot_ms_mean",
    "itl_ms_median",
    "itl_ms_mean",
)
RATE_FIGURES = ("output_tok_s", "total_tok_s", "request_rate", "pp_tok_s", "tg_tok_s")
# llama-bench prints a model's type by its main tensor type; the GGUF mixes those files are (servelab's names)
GGUF_MIXES = {"Q4_K": "Q4_K_M", "Q5_K": "Q5_K_M", "Q3_K": "Q3_K_M", "Q2_K": "Q2_K", "MXFP4": "MXFP4_MOE"}
DEFAULT_PROMPTS = 10  # x concurrency: a serving row that does not say how many prompts (InferenceX's rule)
# the emulation budget of one serving row: at most this many concurrent clients, at most WAVES x concurrency
# requests (at least MIN_REQUESTS) and OUTPUT_BUDGET output tokens in all (the medians of a closed loop settle
# within a few waves); rows beyond it are skipped with the reason
MAX_CONCURRENCY = 1024
WAVES = 3
MIN_REQUESTS = 32
OUTPUT_BUDGET = 400_000
SEED = 0
# the rows' flags (each engine's own name) that servelab's shared planning inputs take: the served context
# (vLLM --max-model-len, sglang --context-length: `plan --context`) and the batch limit (vLLM --max-num-seqs,
# sglang --max-running-requests: `plan --parallel`; each engine's cmdline.SHARED_FLAGS / Settings)
CONTEXT_FLAGS = ("max_model_len", "context_length")
BATCH_LIMIT_FLAGS = ("max_num_seqs", "max_running_requests")


@dataclass(frozen=True)
class Setup:
    row: Measurement
    model: ModelSpec
    gpu: GPU
    plan: Plan
    regime: Regime
    layers: int


@lru_cache(maxsize=1)
def model_table() -> dict[str, dict[str, str]]:
    """models.json: a row's model name -> {"catalog": id} | {"config": file in models/} | {"none": why}."""
    text = resources.files("servelab.predict.corpus").joinpath("models.json").read_text(encoding="utf-8")
    table: dict[str, dict[str, str]] = json.loads(text)["models"]
    return table


def resolve_model(row: Measurement) -> ModelSpec | str:
    """The row's model as a ModelSpec, or why it has none."""
    entry = model_table().get(row.model)
    try:
        if entry is None:
            return load_model(row.model)  # a catalog id given as such
        if "catalog" in entry:
            return load_model(entry["catalog"])
        if "config" in entry:
            text = (
                resources.files("servelab.predict.corpus")
                .joinpath("models", entry["config"])
                .read_text("utf-8")
            )
            doc = json.loads(text)
            return spec_from_config(doc["config"], name=doc["id"], source="corpus")
        return f"no architecture: {entry.get('none', 'not mapped')}"
    except ServelabError as exc:
        return f"model {row.model!r}: {exc}"


def quant_name(row: Measurement) -> str:
    """The row's weight format as servelab names it: llama-bench's type names as the GGUF mixes they are; a
    Hugging Face format's words before a parenthesis ("int4 (Marlin WNA16, BF16 scales)" -> int4)."""
    if row.engine == "llama.cpp":
        return GGUF_MIXES.get(row.weight_format, row.weight_format)
    return row.weight_format.split(" (")[0].strip()


def bench_clients() -> frozenset[str]:
    """The engines' own benchmark tools whose runs are replayed as their steps (`Engine.bench_replay`)."""
    return frozenset(
        c for e in registry.engines() if e.bench_replay is not None for c in e.bench_replay.CLIENTS
    )


def _client(row: Measurement) -> str:
    return row.workload.dataset if row.workload.dataset in bench_clients() else row.source.client


def is_bench(row: Measurement) -> bool:
    return _client(row) in bench_clients()


def eager(row: Measurement, engine: str) -> bool:
    planner = registry.get_engine(engine).planner
    flags = planner.decode_efficiency.eager_flags if planner else ()
    return any(bool(row.flags.get(f)) for f in flags)


def setup(row: Measurement) -> Setup | str:
    """The servelab inputs that predict `row`, or why there are none (kept out, the reason reported)."""
    if row.gpu is None:
        return f"GPU {row.gpu_label!r} is not in the catalog"
    if any("speculative" in k and v not in (None, False, 0, "", "none") for k, v in row.flags.items()):
        return "speculative decoding: the harness does not replay drafts (no acceptance rate stated)"
    if not is_bench(row) and not row.workload.prompt_tokens:
        return "no prompt length stated (a dataset's lengths)"
    unmodelled = _unmodelled_parallelism(row)
    if unmodelled:
        return unmodelled
    model = resolve_model(row)
    if isinstance(model, str):
        return model
    gpu = find_gpu(row.gpu)
    engine = registry.get_engine(row.engine).name
    w = row.workload
    need = w.depth + w.prompt_tokens + w.output_tokens + 16
    stated = _stated(row, CONTEXT_FLAGS)
    context = stated or max(need, 4096)
    context = max(need, min(context, model.max_context or context))
    try:
        plan = make_plan(
            model,
            gpu,
            engine=engine,
            quant=quant_name(row),
            context=context,
            kv_dtype=None if row.kv_dtype in ("f16", "bf16", "auto") else row.kv_dtype,
            gpus=_gpus(row, engine),
            parallel=_stated(row, BATCH_LIMIT_FLAGS) or 1,
            **_plan_flags(row, engine),  # type: ignore[arg-type]
        )
    except ServelabError as exc:
        return f"no plan: {exc}"
    if not is_bench(row) and (row.workload.concurrency or 0) > MAX_CONCURRENCY:
        return f"concurrency above the harness's emulation budget ({MAX_CONCURRENCY})"
    if not is_bench(row) and not plan.fits:
        return "the plan does not fit: " + (plan.warnings[0] if plan.warnings else "no room")
    r = regime(engine, gpu, plan.quant, backend=row.backend, eager=eager(row, engine))
    return Setup(row, model, gpu, plan, r, model.num_layers)


def _unmodelled_parallelism(row: Measurement) -> str:
    """Why a serving row's parallelism is not one the plan can take, or "": the plan puts a vLLM/sglang model on
    one tensor-parallel group, so pipeline stages and data-parallel replicas (with or without expert
    parallelism) would be priced as a shape they are not (llama.cpp's layer split is its own, `_gpus`)."""
    if row.engine == "llama.cpp":
        return ""
    if row.pp > 1:
        return f"pipeline parallelism (PP {row.pp}) is not modelled: the plan takes one tensor-parallel group"
    dp = row.flags.get("data_parallel_size")
    if isinstance(dp, int) and not isinstance(dp, bool) and dp > 1:
        with_ep = " with expert parallelism" if row.ep > 1 else ""
        return (
            f"data parallelism (DP {dp}{with_ep}) is not modelled: the plan takes one tensor-parallel group"
        )
    return ""


def _stated(row: Measurement, names: tuple[str, ...]) -> int:
    """The first of the row's flags `names` it states as a whole number (0: none)."""
    for name in names:
        value = row.flags.get(name)
        if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
            return int(value)
    return 0


def _gpus(row: Measurement, engine: str) -> int:
    """The GPUs one replica runs on: llama.cpp splits layers over every GPU the row had (its TP is 1); vLLM and
    sglang over their tensor-parallel group (rows with pipeline stages or data-parallel replicas are skipped,
    `_unmodelled_parallelism`)."""
    if engine == "llamacpp":
        return max(1, row.gpu_count)
    return max(1, row.tp)


def _plan_flags(row: Measurement, engine: str) -> dict[str, object]:
    """The row's engine flags `make_plan` takes: every stated flag named like a field of the engine's own Settings
    (its batch limits, memory shares and switches), read through the registry so no knob is named here; a
    number where the field takes one, a switch (true/false) where the field is a switch."""
    import dataclasses

    planner = registry.get_engine(engine).planner
    if planner is None:
        return {}
    switches = {f.name for f in dataclasses.fields(planner.settings_type) if isinstance(f.default, bool)}
    fields = {f.name for f in dataclasses.fields(planner.settings_type)}
    numbers = {
        k for k, v in row.flags.items() if isinstance(v, int | float) and not isinstance(v, bool) and v
    }
    switched = {k for k, v in row.flags.items() if isinstance(v, bool)}
    return {k: v for k, v in row.flags.items() if k in switches & switched or k in fields & numbers}


# --- the pass log ---------------------------------------------------------------------------------------------


@dataclass
class StepFigure:
    """One figure as the steps give it: time = Σ shares x step times + idle; a rate is count / time."""

    name: str
    steps: np.ndarray  # (K,) step indices
    shares: np.ndarray  # (K,) each step's share of its time in the figure
    idle_s: float
    count: float = 0.0  # a rate's numerator (tokens, requests); 0 for a time figure (ms)
    divisor: float = 1.0  # a time figure's per-token divisor (TPOT)

    def seconds(self, step_s: np.ndarray) -> float:
        return float(self.shares @ step_s[self.steps]) + self.idle_s

    def of_seconds(self, seconds: float) -> float:
        """The figure for `seconds` of its steps and idle time."""
        if self.count:
            return self.count / seconds if seconds > 0 else math.inf
        return seconds / self.divisor * 1e3

    def value(self, step_s: np.ndarray) -> float:
        return self.of_seconds(self.seconds(step_s))


def _whole(name: str, first: int, last: int, count: float) -> StepFigure:
    """A figure of every step in [first, last) at full share and no idle time (llama-bench's timed passes)."""
    return StepFigure(name, np.arange(first, last), np.ones(last - first), 0.0, count)


@dataclass
class PassLog:
    """Every pass of a row's replay and its figures."""

    # (P, 6): weight bytes, KV + state bytes, matmul FLOPs, attention FLOPs, all-reduce s, prompt matmul FLOPs (of
    # the matmul FLOPs: those of prompt tokens, priced at the prefill compute)
    passes: np.ndarray
    pass_step: np.ndarray  # (P,) the step of each pass
    step_tokens: np.ndarray  # (S,)
    figures: dict[str, StepFigure]
    refused: int = 0

    @property
    def steps(self) -> int:
        return len(self.step_tokens)


@dataclass(frozen=True, kw_only=True)
class _PassRecorder(Roofline):
    """The roofline that lists each pass's raw quantities."""

    rows: list[tuple[int, float, float, float, float, float, float]] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    durations: list[float] = field(default_factory=list)

    def step_s(self, step: Step, speculation: Speculation | None = None) -> float:
        index = len(self.tokens)
        for p in step.passes:
            if p:
                n = sum(w.new + w.verify for w in p)
                weights = self.weight_bytes(n)
                attention = sum(self._attention_flops(w) for w in p)
                self.rows.append(
                    (
                        index,
                        weights,
                        self.pass_bytes(p) - weights,
                        self.pass_flops(p) - attention,
                        attention,
                        self.allreduce_s(n),
                        self.prompt_matmul_flops(p),
                    )
                )
        self.tokens.append(step.tokens)
        seconds = super().step_s(step, speculation)
        self.durations.append(seconds)
        return seconds

    def repeated_decode_s(self, step: Step, count: int) -> list[float] | None:
        """The emulator's run of identical decode steps, each listed as `step_s` lists one (the same sums as
        Roofline.repeated_decode_s: every sequence one token further per step)."""
        times = super().repeated_decode_s(step, count)
        if times is None:
            return None
        works = step.passes[0]
        n, context = len(works), sum(w.context for w in works)
        weights, state = self.weight_bytes(n), 2 * self.state_bytes * n
        matmul, allreduce = n * self.flops_per_token, self.allreduce_s(n)
        j = np.arange(1, count + 1, dtype=float)
        kv = self.kv_full_bytes_per_token * (context + n * (j + 1)) + state
        attention = 4 * self.attention_width_full * (context + n * j + n / 2)
        first = len(self.tokens)
        self.rows.extend(
            (first + i, weights, float(kv[i]), matmul, float(attention[i]), allreduce, 0.0)
            for i in range(count)
        )
        self.tokens.extend([n] * count)
        self.durations.extend(times)  # the emulator may stop early: `_drive` keeps the steps it ran
        return times


def _recorder(base: Roofline) -> _PassRecorder:
    from dataclasses import fields

    return _PassRecorder(**{f.name: getattr(base, f.name) for f in fields(Roofline)})


def rates_for(s: Setup, model: StepModel | None) -> AchievedRates:
    """The step model's figures for the row (None: today's plan figures, no step model)."""
    if model is None:  # today's figures: the plan's (not a shipped fit)
        decode, prefill = s.plan.efficiency.get("decode", 1.0), s.plan.efficiency.get("prefill", 1.0)
        flops = s.gpu.tensor_flops(compute_dtype(s.model, s.gpu))
        return AchievedRates(
            bandwidth_bytes_s=s.gpu.bandwidth_bytes_s * decode, flops_s=flops * prefill, source="plan"
        )
    return model.rates(s.regime, s.gpu, s.layers)


def pass_log(s: Setup, model: StepModel | None) -> PassLog:
    """Replay the row's workload priced by `model` (None: the plan's figures) and list its passes."""
    base = roofline(s.plan, s.model, s.gpu, rates_for(s, model))
    rec = _recorder(base)
    if is_bench(s.row):
        figures = _bench(s, rec)
        refused = 0
    else:
        figures, refused = _serving(s, rec)
    rows = np.array(rec.rows, dtype=float).reshape(-1, 7)
    return PassLog(rows[:, 1:], rows[:, 0].astype(int), np.array(rec.tokens, dtype=float), figures, refused)


def _bench(s: Setup, rec: _PassRecorder) -> dict[str, StepFigure]:
    """An engine's own benchmark tool (llama-bench, llama-batched-bench): the timed steps its `bench_replay`
    says the tool runs, priced in order; each figure is its tokens over those steps."""
    replay = registry.get_engine(s.row.engine).bench_replay
    w, out = s.row.workload, dict[str, StepFigure]()
    if replay is None:
        return out
    bench = BenchWorkload(_client(s.row), w.prompt_tokens, w.output_tokens, w.depth, w.batch or 1)
    for name, steps, tokens in (
        ("pp_tok_s", replay.prompt_steps, w.prompt_tokens),
        ("tg_tok_s", replay.decode_steps, w.output_tokens),
    ):
        if name in s.row.figures and tokens:
            first = len(rec.tokens)
            for step in steps(bench, s.row.flags):
                rec.step_s(step)
            out[name] = _whole(name, first, len(rec.tokens), float(bench.sequences * tokens))
    return out


def _serving(s: Setup, rec: _PassRecorder) -> tuple[dict[str, StepFigure], int]:
    """A serving benchmark's load on the emulated engine: the figures over all its requests."""
    w = s.row.workload
    engine = emulated_engine(s.plan, s.model, s.gpu, rates=rec.rates)
    n = requests_emulated(s.row)
    limit = w.concurrency or n
    if w.request_rate:
        rng = random.Random(SEED)
        t, scheduled = 0.0, []
        for _ in range(n):
            scheduled.append(t)
            t += rng.expovariate(w.request_rate)
    else:
        scheduled = [0.0] * n
    requests = [
        Request(i, 0.0, tuple(range(i * w.prompt_tokens, (i + 1) * w.prompt_tokens)), max(1, w.output_tokens))
        for i in range(n)
    ]
    spans, finished, refused = _drive(engine.new_scheduler(), rec, requests, scheduled, limit)
    return _serving_figures(spans, finished, n, w.prompt_tokens), refused


def requests_emulated(row: Measurement) -> int:
    """How many of the row's requests the harness emulates (the budget above)."""
    w = row.workload
    n = w.num_prompts or DEFAULT_PROMPTS * (w.concurrency or 20)
    c = w.concurrency or n
    n = min(n, max(WAVES * c, MIN_REQUESTS))
    least = (
        c if w.concurrency else MIN_REQUESTS
    )  # a closed loop's clients each send one; arrivals need no wave
    return max(1, min(n, max(least, OUTPUT_BUDGET // max(1, w.output_tokens))))


def _drive(
    scheduler: object, rec: _PassRecorder, requests: list[Request], scheduled: list[float], limit: int
) -> tuple[list[tuple[float, float]], list[Sequence], int]:
    """The client and the engine in virtual time: request i is sent at max(its schedule, a free client);
    each step's (start, end) and the finished sequences (arrival stamped in `Request.arrival_s`)."""
    loop = EngineLoop(scheduler, rec, fast=True)  # type: ignore[arg-type]
    free: list[float] = [0.0] * limit  # when each client is free again
    heapq.heapify(free)
    pending = 0  # next request to send
    waiting: list[tuple[float, int, Request]] = []
    spans: list[tuple[float, float]] = []
    done: list[Sequence] = []
    refused = 0

    def send_ready() -> None:
        nonlocal pending
        while pending < len(requests) and free:
            at = max(scheduled[pending], free[0])
            heapq.heappop(free)
            r = requests[pending]
            heapq.heappush(waiting, (at, pending, Request(r.rid, at, r.prompt, r.output_tokens)))
            pending += 1

    send_ready()
    while waiting or loop.busy():
        while waiting and waiting[0][0] <= loop.now:
            _, _, request = heapq.heappop(waiting)
            outcome = loop.arrive(request)
            if outcome.refused is not None:
                refused += 1
                heapq.heappush(free, loop.now)
                send_ready()
        start, first = loop.now, len(rec.durations)
        result = loop.step(waiting[0][0] if waiting else math.inf)
        if result is None:
            if not waiting:
                break
            loop.now = max(loop.now, waiting[0][0])
            continue
        _keep_ran(rec, first, start, loop.now, spans)
        for seq in result.finished:
            done.append(seq)
            heapq.heappush(free, loop.now + CLIENT_TURNAROUND_S)
        if result.finished:
            send_ready()
    return spans, done, refused


def _keep_ran(
    rec: _PassRecorder, first: int, start: float, end: float, spans: list[tuple[float, float]]
) -> None:
    """The spans of the steps one `EngineLoop.step` ran (a run of repeated decodes stops where the emulator
    stopped it: the steps the recorder listed past `end` are dropped)."""
    t = start
    for k in range(first, len(rec.durations)):
        if t >= end - 1e-12 * max(1.0, end):
            del rec.durations[k:], rec.tokens[k:]
            while rec.rows and rec.rows[-1][0] >= k:
                rec.rows.pop()
            break
        spans.append((t, t + rec.durations[k]))
        t += rec.durations[k]


class _Spans:
    """The replayed steps' (start, end) times, for the figures' overlap sums."""

    def __init__(self, spans: list[tuple[float, float]]) -> None:
        a = np.array(spans, dtype=float).reshape(-1, 2)
        self.starts, self.ends = a[:, 0], a[:, 1]
        self.durations = self.ends - self.starts

    def overlap(
        self, name: str, t0: np.ndarray, t1: np.ndarray, factors: np.ndarray, divisor: float = 1.0
    ) -> StepFigure:
        """Σ_i factors[i] x (the steps overlapping [t0[i], t1[i]], each weighted by the share of it inside, and
        the idle time left) as one figure."""
        t0, t1, factors = np.atleast_1d(t0), np.atleast_1d(t1), np.atleast_1d(factors)
        n = len(self.starts)
        first = np.searchsorted(self.ends, t0, side="right")  # the first step ending after t0
        stop = np.searchsorted(self.starts, t1, side="left")  # past the last step starting before t1
        some = stop > first
        lo, hi, f = first[some], stop[some] - 1, factors[some]
        weights = np.zeros(n + 1)
        np.add.at(weights, lo, f)
        np.add.at(weights, hi + 1, -f)
        weights = np.cumsum(weights)[:n]  # every overlapping step at full share; then each edge at its share
        np.add.at(weights, lo, f * (self._share(lo, t0[some], t1[some]) - 1))
        two = hi > lo
        np.add.at(weights, hi[two], f[two] * (self._share(hi[two], t0[some][two], t1[some][two]) - 1))
        steps = np.nonzero(weights > 1e-15)[0]
        shares = weights[steps]
        idle = float(factors @ (t1 - t0)) - float(shares @ self.durations[steps])
        return StepFigure(name, steps, shares, max(0.0, idle), divisor=divisor)

    def _share(self, k: np.ndarray, t0: np.ndarray, t1: np.ndarray) -> np.ndarray:
        """The share of steps `k` inside [t0, t1]."""
        a, d = self.starts[k], self.durations[k]
        inside = np.clip(np.minimum(self.ends[k], t1) - np.maximum(a, t0), 0.0, None)
        return np.where(d > 0, inside / np.where(d > 0, d, 1.0), 0.0)


def _mid(values: list[tuple[float, int]]) -> list[int]:
    """The indices of the middle value (or two) of (value, index) pairs."""
    ordered = sorted(values)
    n = len(ordered)
    return [ordered[n // 2][1]] if n % 2 else [ordered[n // 2 - 1][1], ordered[n // 2][1]]


def _serving_figures(
    spans: list[tuple[float, float]], done: list[Sequence], n: int, prompt: int
) -> dict[str, StepFigure]:
    if not done or not spans:
        return {}
    sp = _Spans(spans)
    arrival = np.array([seq.request.arrival_s for seq in done])
    first = np.array([seq.token_times[0] if seq.token_times else math.nan for seq in done])
    ttft = [(first[i] - arrival[i], i) for i in range(len(done)) if not math.isnan(first[i])]
    mid = np.array(_mid(ttft))
    out = {
        "ttft_ms_median": sp.overlap(
            "ttft_ms_median", arrival[mid], first[mid], np.full(len(mid), 1 / len(mid))
        )
    }
    every = np.array([i for _, i in ttft])
    out["ttft_ms_mean"] = sp.overlap(
        "ttft_ms_mean", arrival[every], first[every], np.full(len(every), 1 / len(every))
    )
    decoding = [i for i, s in enumerate(done) if len(s.token_times) > 1]
    if decoding:
        last = np.array([done[i].token_times[-1] for i in decoding])
        begin = np.array([done[i].token_times[0] for i in decoding])
        per = np.array([done[i].generated - 1 for i in decoding], dtype=float)
        tpot = [((last[j] - begin[j]) / per[j], j) for j in range(len(decoding))]
        mid = np.array(_mid(tpot))
        out["tpot_ms_median"] = sp.overlap("tpot_ms_median", begin[mid], last[mid], 1 / (len(mid) * per[mid]))
        whole = 1 / (len(decoding) * per)
        out["tpot_ms_mean"] = sp.overlap("tpot_ms_mean", begin, last, whole)
        out["itl_ms_mean"] = sp.overlap(
            "itl_ms_mean", begin, last, whole
        )  # ≈ the mean TPOT (one token per gap)
        times = [np.asarray(done[i].token_times) for i in decoding]
        gap_a = np.concatenate([t[:-1] for t in times])
        gap_b = np.concatenate([t[1:] for t in times])
        order = np.argsort(gap_b - gap_a, kind="stable")
        m = len(order)
        middle = order[[m // 2]] if m % 2 else order[[m // 2 - 1, m // 2]]
        out["itl_ms_median"] = sp.overlap(
            "itl_ms_median", gap_a[middle], gap_b[middle], np.full(len(middle), 1 / len(middle))
        )
    end = max(s.token_times[-1] for s in done if s.token_times)
    tokens = float(sum(s.generated for s in done))
    for name, count in (
        ("output_tok_s", tokens),
        ("total_tok_s", tokens + prompt * len(done)),
        ("request_rate", float(len(done))),
    ):
        f = sp.overlap(name, np.array([0.0]), np.array([end]), np.array([1.0]))
        f.count = count
        out[name] = f
    return out


# --- pricing a pass log ---------------------------------------------------------------------------------------


def step_times(t: PassLog, e: AchievedRates) -> np.ndarray:
    """Each step's seconds under `e` (the step model's pass rule; the same as Roofline.step_s)."""
    p = t.passes
    if e.split:
        kv_bw = e.kv_bandwidth_bytes_s or e.bandwidth_bytes_s
        att = e.attention_flops_s or e.flops_s
        memory = p[:, 0] / e.bandwidth_bytes_s + p[:, 1] / kv_bw
        prefill = e.prefill_flops_s or e.flops_s
        compute = (p[:, 2] - p[:, 5]) / e.flops_s + p[:, 5] / prefill + p[:, 3] / att
        per_pass = np.maximum(memory, compute) + e.pass_overhead_s + p[:, 4] * e.allreduce_scale
    else:
        per_pass = (
            np.maximum((p[:, 0] + p[:, 1]) / e.bandwidth_bytes_s, (p[:, 2] + p[:, 3]) / e.flops_s) + p[:, 4]
        )
    out = np.bincount(t.pass_step, weights=per_pass, minlength=t.steps) if len(p) else np.zeros(t.steps)
    return out + e.step_overhead_s + e.token_overhead_s * t.step_tokens


def figures(t: PassLog, e: AchievedRates) -> dict[str, float]:
    times = step_times(t, e)
    return {name: f.value(times) for name, f in t.figures.items()}


PredictFn = Callable[[Setup], dict[str, float]]


def predict_row(s: Setup, model: StepModel | None) -> dict[str, float]:
    """The row's figures predicted with `model` (None: today's plan figures): a full replay priced by it."""
    t = pass_log(s, model)
    return {k: v for k, v in figures(t, rates_for(s, model)).items() if k in s.row.figures}


def mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else math.nan


__all__ = ["PassLog", "Setup", "figures", "median", "pass_log", "predict_row", "setup", "step_times"]

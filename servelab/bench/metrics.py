"""Benchmark metrics as pure functions of recorded timestamps (definitions in docs/metrics.md).

Times are nanoseconds in, milliseconds out. Percentiles use linear interpolation between closest ranks
(Hyndman–Fan type 7, numpy's default): p of sorted x[0..n-1] is x[h] interpolated at h = (n-1)·p/100.
A level's distributions (`bench.stats.Distribution`) are built in `bench.summary` from the raw
per-request records, never from other summaries, so results from several client processes merge exactly.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from servelab.errors import ConfigError
from servelab.ranges import number as in_range
from servelab.results.records import RequestRecord

SLO_KEYS = ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms")
MAX_SLO_MS = 86_400_000.0  # a day
REPREFILL_GAP_FACTOR = (
    10.0  # a mid-stream gap this many times the request's median gap looks like a re-prefill
)
REPREFILL_MIN_GAPS = 4
REPREFILL_MIN_MS = 20.0  # and at least half the request's own TTFT (processing its prompt again) and 20 ms


def percentile(values: Sequence[float], p: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's "linear" method); None for no values."""
    if not len(values):
        return None
    return float(np.percentile(np.asarray(values, dtype=float), p, method="linear"))


# -- per request --------------------------------------------------------------------------------------------
def ttft_ms(r: RequestRecord) -> float | None:
    """First token-bearing chunk − send."""
    return None if r.first_token_ns is None else (r.first_token_ns - r.sent_ns) / 1e6


def ttft_sched_ms(r: RequestRecord) -> float | None:
    """First token − intended send time (what a user arriving on schedule waits)."""
    if r.first_token_ns is None or r.intended_ns is None:
        return None
    return (r.first_token_ns - r.intended_ns) / 1e6


def lateness_ms(r: RequestRecord) -> float | None:
    return None if r.intended_ns is None else (r.sent_ns - r.intended_ns) / 1e6


def e2e_ms(r: RequestRecord) -> float | None:
    """Last token-bearing chunk − send."""
    return (r.chunk_ns[-1] - r.sent_ns) / 1e6 if len(r.chunk_ns) else None


def decode_tokens(r: RequestRecord) -> int:
    """Tokens after the first chunk: those the decode time produced (server count when it gave one)."""
    if not len(r.chunk_tokens):
        return 0
    total = r.output_tokens if r.status == "ok" and r.output_tokens is not None else sum(r.chunk_tokens)
    return total - r.chunk_tokens[0]


def tpot_ms(r: RequestRecord) -> float | None:
    """(last chunk − first chunk) / (output tokens − tokens of the first chunk)."""
    n = decode_tokens(r)
    return (r.chunk_ns[-1] - r.chunk_ns[0]) / 1e6 / n if n > 0 else None


def itl_samples_ms(r: RequestRecord) -> list[float]:
    """Per-token ITL: a chunk carrying n tokens after a gap g gives n samples of g/n."""
    out: list[float] = []
    gaps = itertools.pairwise(r.chunk_ns)  # one pass, no indexing: a level's hot loop
    for (before, at), n in zip(gaps, r.chunk_tokens[1:], strict=False):
        if n > 0:
            out.extend([(at - before) / 1e6 / n] * n)
    return out


def chunk_gaps_ms(r: RequestRecord) -> list[float]:
    """Raw gaps between consecutive token-bearing chunks (inter-chunk latency)."""
    return [(at - before) / 1e6 for before, at in itertools.pairwise(r.chunk_ns)]


def decode_tok_s(r: RequestRecord) -> float | None:
    """Per-stream decode speed, 1000 / TPOT."""
    tpot = tpot_ms(r)
    return 1000.0 / tpot if tpot else None


def prefill_tok_s(r: RequestRecord) -> float | None:
    """Prompt tokens / TTFT (includes queueing and network: a lower bound of the engine's prefill speed)."""
    ttft = ttft_ms(r)
    return r.prompt_tokens / ttft * 1000.0 if r.prompt_tokens and ttft else None


def eviction_signal(r: RequestRecord) -> str | None:
    """Why this request looks like its prompt was processed again, or None.

    cache_n: the server cached fewer prompt tokens than the workload had primed (llama.cpp timings /
    usage.prompt_tokens_details); prompt_n: it processed more prompt tokens than the prompt has;
    reprefill_gap: a mid-stream gap ≥ 10× the request's median chunk gap, ≥ half its TTFT and ≥ 20 ms.
    """
    cached = r.cached_prompt_tokens
    if r.expected_cached_tokens and cached is not None and cached < r.expected_cached_tokens:
        return "cache_n"
    timings = r.server_timings or {}
    prompt_n = timings.get("prompt_n")
    if isinstance(prompt_n, int) and r.expected_prompt_tokens and prompt_n > r.expected_prompt_tokens:
        return "prompt_n"
    if len(r.chunk_ns) > REPREFILL_MIN_GAPS:
        # chunk_gaps_ms sorted, in numpy (every record of a run passes here): the same floats, and the median
        # as statistics.median takes it (the middle one, or the two middle ones' mean)
        gaps = np.sort(np.diff(np.asarray(r.chunk_ns, dtype=np.int64)) / 1e6)
        half = len(gaps) // 2
        median = float(gaps[half]) if len(gaps) % 2 else (float(gaps[half - 1]) + float(gaps[half])) / 2
        floor = max(REPREFILL_GAP_FACTOR * median, 0.5 * (ttft_ms(r) or 0.0), REPREFILL_MIN_MS)
        if float(gaps[-1]) >= floor:
            return "reprefill_gap"
    return None


def mark_eviction(r: RequestRecord) -> RequestRecord:
    """Set ``evicted``/``eviction_signal`` on a finished record (the runner calls this before storing it)."""
    signal = eviction_signal(r) if r.status == "ok" else None
    r.evicted, r.eviction_signal = signal is not None, signal
    return r


# -- SLOs and windows ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Slo:
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    itl_ms: float | None = None  # p99 of the request's own per-token ITL
    e2e_ms: float | None = None

    def met_by(self, r: RequestRecord) -> bool:
        if r.status != "ok":
            return False
        checks = (
            (self.ttft_ms, ttft_ms(r)),
            (self.tpot_ms, tpot_ms(r)),
            (self.itl_ms, percentile(itl_samples_ms(r), 99.0)),
            (self.e2e_ms, e2e_ms(r)),
        )
        return all(limit is None or (value is not None and value <= limit) for limit, value in checks)

    @property
    def empty(self) -> bool:
        return all(v is None for v in (self.ttft_ms, self.tpot_ms, self.itl_ms, self.e2e_ms))


def parse_slo(text: str | dict | None) -> Slo:
    """``ttft_ms=500,tpot_ms=50`` (or that mapping, from an experiment YAML) → Slo; ConfigError naming the
    keys otherwise. Each limit is a number of milliseconds above 0 and at most a day."""
    if not text:
        return Slo()
    if isinstance(text, dict):
        pairs = [(str(k), v) for k, v in text.items()]
    else:
        pairs = [
            (key, value) for key, _, value in (part.strip().partition("=") for part in str(text).split(","))
        ]
    values: dict[str, float] = {}
    for key, given in pairs:
        if key not in SLO_KEYS:
            raise ConfigError(f"unknown SLO {key!r} in --slo; use {', '.join(k + '=N' for k in SLO_KEYS)}")
        try:
            value = float(given) if isinstance(given, str) else given
        except ValueError:
            raise ConfigError(f"bad number {given!r} for {key} in --slo") from None
        values[key] = in_range(value, f"--slo {key}", 0, MAX_SLO_MS, "ms", above=True)
    return Slo(**values)


def tokens_in_window(records: Iterable[RequestRecord], t0_ns: int, t1_ns: int) -> int:
    """Output tokens whose chunk arrived inside [t0, t1] (counted by arrival: no edge bias)."""
    total = 0
    for r in records:
        for t, n in zip(r.chunk_ns, r.chunk_tokens, strict=True):
            if t0_ns <= t <= t1_ns:
                total += n
    return total

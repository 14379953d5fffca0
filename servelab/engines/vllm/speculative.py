"""vLLM's speculative-decoding numbers: the periodic "SpecDecoding metrics" log line and the Prometheus counters.

Log (vllm/v1/spec_decode/metrics.py@016a8587edb0), one line per logging interval, counts are per interval:
  SpecDecoding metrics: Mean acceptance length: 2.62, Accepted throughput: ..., Drafted throughput: ...,
  Accepted: 1625 tokens, Drafted: 2000 tokens, Per-position acceptance rate: 0.885, 0.740, Avg Draft ...
Mean acceptance length = 1 + accepted / drafts (bonus included); gamma = number of per-position rates.
vLLM v0 (<= 0.9, vllm/engine/metrics.py; real line in vllm#9539) printed CUMULATIVE counts instead:
  Speculative metrics: Draft acceptance rate: 0.642, System efficiency: 0.598, Number of speculative tokens: 3,
  Number of accepted tokens: 8547, Number of draft tokens: 13311, Number of emitted tokens: 10616.
so the last such line holds the totals.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from servelab.engines.prometheus import metric_sums, samples
from servelab.results.observation import SpecObservation

LOG_MARKER = "SpecDecoding metrics:"
V0_MARKER = "Speculative metrics: Draft acceptance rate:"
_V0 = re.compile(
    r"Number of speculative tokens: (\d+), Number of accepted tokens: (\d+), Number of draft tokens: (\d+)"
)
_ACCEPTED = re.compile(r"Accepted: (\d+) tokens")
_DRAFTED = re.compile(r"Drafted: (\d+) tokens")
_PER_POSITION = re.compile(r"Per-position acceptance rate: ([0-9., ]+)")
METRICS = (
    "vllm:spec_decode_num_accepted_tokens_total",
    "vllm:spec_decode_num_draft_tokens_total",
    "vllm:spec_decode_num_drafts_total",
)
# one series per draft position (label "position", 0 .. num_speculative_tokens - 1; vllm/v1/spec_decode/metrics.py):
# their count is gamma, where drafted / drafts is below it whenever n-gram drafts come out short
PER_POSITION = "vllm:spec_decode_num_accepted_tokens_per_pos_total"


def parse_log(lines: Iterable[str], where: str) -> SpecObservation | None:
    """Pool every SpecDecoding metrics line of a log; None when there is none."""
    pooled: SpecObservation | None = None
    last_v0: SpecObservation | None = None
    for line in lines:
        if V0_MARKER in line:
            last_v0 = _parse_v0_line(line, where) or last_v0
        if LOG_MARKER not in line:
            continue
        found = _parse_line(line, where)
        if found is not None:
            pooled = found if pooled is None else pooled.merged(found)
    return pooled or last_v0


def _parse_v0_line(line: str, where: str) -> SpecObservation | None:
    match = _V0.search(line)
    if match is None or int(match.group(1)) == 0:
        return None
    gamma, accepted, drafted = (int(g) for g in match.groups())
    return SpecObservation(
        engine="vllm",
        where=where,
        samples=1,
        accepted_tokens=float(accepted),
        drafted_tokens=float(drafted),
        verify_steps=drafted / gamma,
        draft_tokens=gamma,
    )


def _parse_line(line: str, where: str) -> SpecObservation | None:
    accepted, drafted, per_position = (
        _ACCEPTED.search(line),
        _DRAFTED.search(line),
        _PER_POSITION.search(line),
    )
    if accepted is None or drafted is None or per_position is None:
        return None
    gamma = len([p for p in per_position.group(1).split(",") if p.strip().rstrip(".")])
    if gamma == 0:
        return None
    drafted_tokens = float(drafted.group(1))
    return SpecObservation(
        engine="vllm",
        where=where,
        samples=1,
        accepted_tokens=float(accepted.group(1)),
        drafted_tokens=drafted_tokens,
        verify_steps=drafted_tokens / gamma,
        draft_tokens=gamma,
    )


def parse_metrics(metrics_text: str, where: str) -> SpecObservation | None:
    """From /metrics counters (cumulative since start); None when the server exposes none."""
    sums = metric_sums(metrics_text, METRICS)
    accepted, drafted, drafts = (sums.get(name) for name in METRICS)
    if accepted is None or drafted is None or not drafts:
        return None
    return SpecObservation(
        engine="vllm",
        where=where,
        samples=1,
        accepted_tokens=accepted,
        drafted_tokens=drafted,
        verify_steps=drafts,
        # drafted / drafts <= gamma, so its rounding never overshoots; an excerpt with fewer position series
        # than gamma still gets the ratio's figure
        draft_tokens=max(_positions(metrics_text), round(drafted / drafts)),
    )


def _positions(metrics_text: str) -> int:
    """Draft positions the server counts acceptance for (gamma), 0 when it exposes none."""
    return len({s.labels.get("position") for s in samples(metrics_text) if s.name == PER_POSITION} - {None})

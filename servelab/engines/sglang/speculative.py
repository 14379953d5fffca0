"""SGLang's speculative-decoding numbers: "accept len" in decode log lines and the spec_accept_* gauges.

Log (python/sglang/srt/managers/scheduler_metrics_mixin.py@01bb3c807f7e, log_decode_stats):
  "Decode batch, #running-req: 1, #token: 5120, token usage: 0.01, accept len: 1.07, accept rate: 0.02, cuda graph: True, ..."
accept len = tokens per verify step, bonus included. "accept rate" changed meaning between versions
(accept_len / num_draft_tokens, later (accept_len - 1) / drafts per round), so only accept len is used.
gamma is read from the "server_args=ServerArgs(..., speculative_num_steps=3, ...)" startup line when the
log has it (draft steps per verify; exact for top-k 1, an approximation for tree drafts), else --draft-tokens.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from servelab.engines.prometheus import metric_counts, metric_sums
from servelab.results.observation import SpecObservation

_ACCEPT_LEN = re.compile(r"accept len: ([0-9.]+)")
_ACCEPT_RATE = re.compile(r"accept rate: ([0-9.]+)")
_NUM_STEPS = re.compile(r"speculative_num_steps=(\d+)")
ACCEPT_LENGTH_GAUGE = "sglang:spec_accept_length"


def parse_log(lines: Iterable[str], where: str) -> SpecObservation | None:
    """Mean accept length over the decode lines of a log; None when there is none."""
    lengths: list[float] = []
    rates: list[float] = []
    num_steps: int | None = None
    for line in lines:
        if "speculative_num_steps=" in line and (steps := _NUM_STEPS.search(line)):
            num_steps = int(steps.group(1)) or None
        if "accept len: " not in line or not (match := _ACCEPT_LEN.search(line)):
            continue
        lengths.append(float(match.group(1)))
        if rate := _ACCEPT_RATE.search(line):
            rates.append(float(rate.group(1)))
    if not lengths:
        return None
    return SpecObservation(
        engine="sglang",
        where=where,
        samples=len(lengths),
        accept_length=sum(lengths) / len(lengths),
        token_accept_rate=sum(rates) / len(rates) if rates else None,
        draft_tokens=num_steps,
    )


def parse_metrics(metrics_text: str, where: str) -> SpecObservation | None:
    """The accept-length gauge (mean over label sets); None when absent or zero (no speculation yet)."""
    total = metric_sums(metrics_text, (ACCEPT_LENGTH_GAUGE,)).get(ACCEPT_LENGTH_GAUGE)
    count = metric_counts(metrics_text, ACCEPT_LENGTH_GAUGE)
    if not total or not count:
        return None
    return SpecObservation(engine="sglang", where=where, samples=count, accept_length=total / count)

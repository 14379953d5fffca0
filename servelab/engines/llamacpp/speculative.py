"""llama-server's speculative-decoding numbers: per-request timing lines, the draft settings, /metrics counters.

Log (tools/server/server-context.cpp print_timings), one line per finished request with a draft:
  b1-0c1e570:  "draft acceptance = 0.57143 (   12 accepted /    21 generated), mean len =  2.71"
  2024-2025:   "draft acceptance rate = 0.57143 (   12 accepted /    21 generated)"
"mean len" = 1 + accepted / verify steps (bonus included). The draft size comes from the speculative
init line "- n_max=4, n_min=0, p_min=0.00" (common/speculative.cpp). Drafts can be shorter than n_max.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from servelab.engines.prometheus import metric_sums
from servelab.results.observation import SpecObservation

_ACCEPTANCE = re.compile(r"draft acceptance(?: rate)? = ([0-9.]+) \( *(\d+) accepted / *(\d+) generated\)")
_MEAN_LEN = re.compile(r"mean len = *([0-9.]+)")
_N_MAX = re.compile(r"- n_max=(\d+), n_min=")
METRICS = (
    "llamacpp:spec_decode_num_accepted_tokens_total",
    "llamacpp:spec_decode_num_draft_tokens_total",
    "llamacpp:spec_decode_num_drafts_total",
)


def parse_log(lines: Iterable[str], where: str) -> SpecObservation | None:
    """Pool the draft-acceptance lines of a llama-server log; None when there is none."""
    accepted = drafted = 0
    steps: float | None = 0.0
    samples = 0
    n_max: int | None = None
    for line in lines:
        if "n_max=" in line and (match := _N_MAX.search(line)):
            n_max = int(match.group(1))
        if "draft acceptance" not in line or not (match := _ACCEPTANCE.search(line)):
            continue
        samples += 1
        line_accepted, line_drafted = int(match.group(2)), int(match.group(3))
        accepted, drafted = accepted + line_accepted, drafted + line_drafted
        steps = _add_steps(steps, line_accepted, _MEAN_LEN.search(line))
    if samples == 0:
        return None
    return SpecObservation(
        engine="llamacpp",
        where=where,
        samples=samples,
        accepted_tokens=float(accepted),
        drafted_tokens=float(drafted),
        verify_steps=steps or None,
        draft_tokens=n_max,
    )


def _add_steps(steps: float | None, accepted: int, mean_len: re.Match | None) -> float | None:
    """Verify steps = accepted / (mean len - 1); unknown (None) once a line cannot tell (no mean len, or 0 accepted)."""
    if steps is None or mean_len is None:
        return None
    extra = float(mean_len.group(1)) - 1.0
    if accepted == 0 or extra <= 0:
        return None
    return steps + accepted / extra


def parse_metrics(metrics_text: str, where: str) -> SpecObservation | None:
    """From /metrics (server started with --metrics); None when the counters are absent or zero."""
    sums = metric_sums(metrics_text, METRICS)
    accepted, drafted, drafts = (sums.get(name) for name in METRICS)
    if accepted is None or drafted is None or not drafts:
        return None
    return SpecObservation(
        engine="llamacpp",
        where=where,
        samples=1,
        accepted_tokens=accepted,
        drafted_tokens=drafted,
        verify_steps=drafts,
    )

"""One level's results, recomputed from its raw RequestRecords (never from other summaries)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from servelab.bench import metrics as m
from servelab.bench.records import RequestRecord
from servelab.bench.schedule import steady_window


def _values(records: Sequence[RequestRecord], fn) -> list[float]:
    return [v for v in (fn(r) for r in records) if v is not None]


def summarize_level(
    records: Sequence[RequestRecord], concurrency: int | None, slo: m.Slo | None = None
) -> dict:
    """Every figure of one level (repeat) from its measured records; warm-up records are left out."""
    measured = [r for r in records if r.phase == "measure"]
    ok = [r for r in measured if r.status == "ok"]
    errors = Counter(r.error_kind for r in measured if r.status != "ok")
    slots = concurrency or max(1, _peak_inflight(measured))
    window = steady_window([(r.sent_ns, r.end_ns) for r in measured], slots)
    itl = [x for r in ok for x in m.itl_samples_ms(r)]
    summary: dict = {
        "concurrency": concurrency,
        "requests": len(measured),
        "completed": len(ok),
        "errors": sum(errors.values()),
        "errors_by_kind": dict(sorted(errors.items())),
        "evictions": sum(1 for r in ok if r.evicted),
        "ttft_ms": m.distribution(_values(ok, m.ttft_ms)),
        "itl_ms": m.distribution(itl),
        "chunk_gap_ms": m.distribution([x for r in ok for x in m.chunk_gaps_ms(r)]),
        "tpot_ms": m.distribution(_values(ok, m.tpot_ms)),
        "e2e_ms": m.distribution(_values(ok, m.e2e_ms)),
        "per_stream_tok_s": m.distribution(_values(ok, m.decode_tok_s)),
        "prefill_tok_s": m.distribution(_values(ok, m.prefill_tok_s)),
        "tokens": _token_counts(measured),
    }
    summary.update(_throughput(ok, window))
    summary.update(_open_loop(measured))
    if slo is not None and not slo.empty:
        good = [r for r in measured if slo.met_by(r)]
        summary["goodput_req_s"] = _in_window(good, window) / window.seconds if window else 0.0
        summary["slo_attainment"] = len(good) / len(measured) if measured else None
    return summary


def _throughput(ok: Sequence[RequestRecord], window) -> dict:
    if window is None:
        return {"window": None, "output_tok_s": 0.0, "total_tok_s": 0.0, "request_s": 0.0}
    out = m.tokens_in_window(ok, window.t0_ns, window.t1_ns)
    prompt = sum(
        r.prompt_tokens or 0
        for r in ok
        if r.first_token_ns and window.t0_ns <= r.first_token_ns <= window.t1_ns
    )
    return {
        "window": {
            "t0_ns": window.t0_ns,
            "t1_ns": window.t1_ns,
            "seconds": window.seconds,
            "steady": window.steady,
        },
        "output_tok_s": out / window.seconds,
        "total_tok_s": (out + prompt) / window.seconds,
        "request_s": _in_window(ok, window) / window.seconds,
    }


def _in_window(records: Sequence[RequestRecord], window) -> int:
    return sum(1 for r in records if len(r.chunk_ns) and window.t0_ns <= r.chunk_ns[-1] <= window.t1_ns)


def _open_loop(measured: Sequence[RequestRecord]) -> dict:
    late = _values(measured, m.lateness_ms)
    if not late or all(r.intended_ns == r.sent_ns for r in measured):
        return {}
    ok = [r for r in measured if r.status == "ok"]
    return {
        "lateness_ms": m.distribution(late),
        "ttft_sched_ms": m.distribution(_values(ok, m.ttft_sched_ms)),
    }


def _token_counts(measured: Sequence[RequestRecord]) -> dict:
    ok = [r for r in measured if r.status == "ok"]
    return {
        "output": sum(r.output_tokens or 0 for r in ok),
        "prompt": sum(r.prompt_tokens or 0 for r in ok),
        "source": dict(Counter(r.tokens_source for r in ok)),
        "chunk_source": dict(Counter(r.chunk_tokens_source or "none" for r in ok)),
        "mismatches": sum(1 for r in ok if r.token_mismatch),
        "early_eos": sum(1 for r in ok if r.early_eos),
    }


def _peak_inflight(records: Sequence[RequestRecord]) -> int:
    events = sorted(
        [(r.sent_ns, 1) for r in records] + [(r.end_ns, -1) for r in records], key=lambda x: (x[0], x[1])
    )
    peak = inflight = 0
    for _, step in events:
        inflight += step
        peak = max(peak, inflight)
    return peak

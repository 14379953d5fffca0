"""Metrics as pure functions of timestamps: exact values on hand-built records."""

from __future__ import annotations

from array import array

import pytest

from servelab.bench import metrics as m
from servelab.bench.events import StreamTally
from servelab.bench.summary import summarize_level
from servelab.errors import ConfigError
from servelab.results.level_key import Level
from servelab.results.records import RequestRecord

MS = 1_000_000


def record(sent_ms, chunks_ms, tokens, **kw) -> RequestRecord:
    base = dict(target_index=0, level="c=1", repeat=0, request_index=0, phase="measure", status="ok")
    base.update(kw)
    return RequestRecord(
        **base,
        sent_ns=sent_ms * MS,
        end_ns=(chunks_ms[-1] if chunks_ms else sent_ms) * MS + MS,
        first_token_ns=chunks_ms[0] * MS if chunks_ms else None,
        chunk_ns=array("q", [t * MS for t in chunks_ms]),
        chunk_tokens=array("i", tokens),
    )


def test_percentile_is_linear_between_closest_ranks():
    values = [1.0, 2.0, 3.0, 4.0]
    assert m.percentile(values, 50) == 2.5
    assert m.percentile(values, 0) == 1.0
    assert m.percentile(values, 100) == 4.0
    assert m.percentile(values, 90) == pytest.approx(3.7)
    assert m.percentile([], 50) is None
    assert m.percentile([7.0], 99.9) == 7.0


def test_ttft_e2e_tpot_and_per_token_itl_for_multi_token_chunks():
    r = record(0, [100, 120, 160], [1, 2, 4])
    assert m.ttft_ms(r) == 100.0
    assert m.e2e_ms(r) == 160.0
    assert m.tpot_ms(r) == pytest.approx(60 / 6)
    assert m.itl_samples_ms(r) == [10.0, 10.0, 10.0, 10.0, 10.0, 10.0]
    assert m.chunk_gaps_ms(r) == [20.0, 40.0]
    assert m.decode_tok_s(r) == pytest.approx(100.0)


def test_zero_token_chunks_give_no_itl_samples_and_no_division():
    r = record(0, [10, 30], [1, 0])
    assert m.itl_samples_ms(r) == []
    assert m.tpot_ms(r) is None


def test_prefill_tok_s_uses_prompt_tokens_over_ttft():
    r = record(0, [50, 60], [1, 1], prompt_tokens=500)
    assert m.prefill_tok_s(r) == pytest.approx(10_000.0)


def test_reprefill_gap_marks_eviction_and_cache_shortfall_too():
    steady = record(0, [10, 20, 30, 40, 50, 60], [1] * 6)
    assert m.eviction_signal(steady) is None
    stalled = record(0, [10, 20, 30, 40, 240, 250], [1] * 6)
    assert m.eviction_signal(record(0, [10, 11, 12, 13, 25, 26], [1] * 6)) is None  # 12 ms: under the floor
    assert m.eviction_signal(stalled) == "reprefill_gap"
    lost_cache = record(0, [10, 20], [1, 1], expected_cached_tokens=96, cached_prompt_tokens=0)
    assert m.mark_eviction(lost_cache).evicted and lost_cache.eviction_signal == "cache_n"
    reprocessed = record(0, [10, 20], [1, 1], expected_prompt_tokens=100, server_timings={"prompt_n": 180})
    assert m.eviction_signal(reprocessed) == "prompt_n"


def test_slo_parse_and_goodput():
    slo = m.parse_slo("ttft_ms=50,tpot_ms=10")
    fast = record(0, [40, 50, 60], [1, 1, 1])
    slow = record(0, [80, 90, 100], [1, 1, 1])
    assert slo.met_by(fast) and not slo.met_by(slow)
    with pytest.raises(ConfigError, match="unknown SLO 'latency'"):
        m.parse_slo("latency=5")
    with pytest.raises(ConfigError, match="bad number"):
        m.parse_slo("ttft_ms=fast")


def test_slo_from_an_experiment_mapping_is_the_same_slo_and_is_range_checked():
    assert m.parse_slo({"ttft_ms": 50, "tpot_ms": 10}) == m.parse_slo("ttft_ms=50,tpot_ms=10")
    with pytest.raises(ConfigError, match=r"^--slo e2e_ms must be a number above 0 .*, got True$"):
        m.parse_slo({"e2e_ms": True})


def test_tokens_in_window_counts_by_arrival():
    r = record(0, [10, 20, 30, 40], [1, 2, 3, 4])
    assert m.tokens_in_window([r], 15 * MS, 35 * MS) == 5


def test_level_summary_counts_errors_by_kind_and_excludes_warmup():
    ok = record(0, [10, 20], [1, 1], output_tokens=2, tokens_source="server")
    warm = record(0, [5, 6], [1, 1], phase="warmup")
    err = record(0, [], [], status="error", error_kind="http_429")
    drop = record(0, [], [], status="error", error_kind="dropped")
    s = summarize_level([ok, warm, err, drop], Level.closed(1))
    assert (s.requests, s.completed, s.errors) == (3, 1, 2)
    assert s.errors_by_kind == {"dropped": 1, "http_429": 1}
    assert s.tokens.output == 2 and s.tokens.source == {"server": 1}
    assert s.ttft_ms.p50 == 10.0


def test_stream_tally_skips_role_chunk_and_uses_usage_deltas():
    t = StreamTally()
    t.add(
        {"choices": [{"delta": {"role": "assistant", "content": ""}}], "usage": {"completion_tokens": 0}}, 1
    )
    t.add({"choices": [{"delta": {"content": "ab"}}], "usage": {"completion_tokens": 2}}, 5)
    t.add({"choices": [{"delta": {"reasoning_content": "c"}}], "usage": {"completion_tokens": 3}}, 9)
    t.add({"choices": [{"delta": {}, "finish_reason": "length"}], "usage": {"completion_tokens": 3}}, 11)
    t.add({"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 3}}, 12)
    assert t.first_token_ns == 5
    assert list(t.chunk_ns) == [5, 9] and list(t.chunk_tokens) == [2, 1]
    assert t.chunk_tokens_source == "usage" and t.finish_reason == "length"
    assert t.final_usage == {"prompt_tokens": 7, "completion_tokens": 3}


def test_stream_tally_without_usage_counts_one_per_chunk_and_tool_calls_bear_tokens():
    t = StreamTally()
    t.add({"choices": [{"delta": {"tool_calls": [{"index": 0}]}}]}, 3)
    t.add({"choices": [{"text": "x"}]}, 4)
    t.add({"choices": [{"text": ""}]}, 5)
    assert list(t.chunk_tokens) == [1, 1] and t.chunk_tokens_source == "one_per_chunk"
    assert t.first_token_ns == 3


def _ragged_records(seed: int) -> list[RequestRecord]:
    """Records of uneven gaps (odd nanoseconds), chunks of 0 to 3 tokens, one without chunks, one failed."""
    import random

    rng = random.Random(seed)
    out = []
    for k in range(40):
        sent = rng.randrange(0, 10**9)
        stamps = sorted(sent + rng.randrange(1, 3 * 10**9) for _ in range(rng.randrange(0, 30)))
        tokens = [rng.choice((0, 1, 1, 1, 2, 3)) for _ in stamps]
        out.append(
            RequestRecord(
                target_index=0,
                level="c=8",
                repeat=0,
                request_index=k,
                phase="measure",
                status="ok" if k != 7 else "error",
                sent_ns=sent,
                end_ns=(stamps[-1] if stamps else sent) + 1,
                first_token_ns=stamps[0] if stamps else None,
                chunk_ns=array("q", stamps),
                chunk_tokens=array("i", tokens),
            )
        )
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_levels_itl_gaps_and_window_tokens_are_the_per_record_functions_bit_for_bit(seed):
    """summarize_level computes ITL, chunk gaps and the tokens in its window over all records at once (numpy):
    the same floats and counts as bench/metrics.py's per-record functions give one record at a time."""
    from servelab.results.stats import Distribution

    records = _ragged_records(seed)
    ok = [r for r in records if r.status == "ok"]
    s = summarize_level(records, Level.closed(8))
    assert s.itl_ms == Distribution.of([x for r in ok for x in m.itl_samples_ms(r)]) and s.itl_ms.n > 100
    assert s.chunk_gap_ms == Distribution.of([x for r in ok for x in m.chunk_gaps_ms(r)])
    assert s.window is not None
    assert s.output_tok_s == m.tokens_in_window(ok, s.window.t0_ns, s.window.t1_ns) / s.window.seconds
    # a record whose counts do not line up with its stamps takes the per-record path, which refuses it as before
    ok[0].chunk_tokens = ok[0].chunk_tokens[:-1]
    with pytest.raises(ValueError):
        summarize_level(ok, Level.closed(8))


@pytest.mark.parametrize("seed", [4, 5])
def test_the_eviction_signal_is_the_list_and_statistics_median_one(seed):
    """eviction_signal's gaps and median in numpy flag the same records as the list and statistics.median."""
    import statistics

    def reference(r):
        gaps = m.chunk_gaps_ms(r)
        if len(gaps) >= m.REPREFILL_MIN_GAPS:
            floor = max(
                m.REPREFILL_GAP_FACTOR * statistics.median(gaps),
                0.5 * (m.ttft_ms(r) or 0.0),
                m.REPREFILL_MIN_MS,
            )
            if max(gaps) >= floor:
                return "reprefill_gap"
        return None

    records = _ragged_records(seed)
    for r in records[:10]:  # one long stall mid-stream each, of several sizes
        if len(r.chunk_ns) > 6:
            r.chunk_ns = array(
                "q",
                [t + ((r.request_index % 3) * 3 * 10**9 if i > 3 else 0) for i, t in enumerate(r.chunk_ns)],
            )
    got = [m.eviction_signal(r) for r in records]
    assert got == [reference(r) for r in records]
    assert "reprefill_gap" in got and None in got

"""SSE parsing: events split across reads, several per read, comments, CRLF — with exact timestamps."""

from __future__ import annotations

from servelab.bench.sse import SseParser


def test_one_event_in_one_read_gets_that_reads_time():
    parser = SseParser()
    events = parser.feed(b'data: {"a": 1}\n\n', 100)
    assert [(e.data, e.t_ns) for e in events] == [('{"a": 1}', 100)]
    assert not parser.pending


def test_event_split_over_reads_is_stamped_at_its_first_byte():
    parser = SseParser()
    assert parser.feed(b"da", 10) == []
    assert parser.pending
    assert parser.feed(b"ta: x", 20) == []
    events = parser.feed(b"yz\n\n", 30)
    assert [(e.data, e.t_ns) for e in events] == [("xyz", 10)]


def test_several_events_in_one_read_share_its_time():
    parser = SseParser()
    events = parser.feed(b"data: 1\n\ndata: 2\n\ndata: 3", 50)
    assert [(e.data, e.t_ns) for e in events] == [("1", 50), ("2", 50)]
    events = parser.feed(b"\n\n", 60)
    assert [(e.data, e.t_ns) for e in events] == [("3", 50)]


def test_keepalive_comments_are_counted_not_events_and_do_not_set_the_stamp():
    parser = SseParser()
    assert parser.feed(b": keep-alive\n\n", 5) == []
    assert parser.feed(b": keep-alive\n\n", 6) == []
    events = parser.feed(b"data: tok\n\n", 7)
    assert [(e.data, e.t_ns) for e in events] == [("tok", 7)]
    assert parser.comments == 2


def test_crlf_multiline_data_and_other_fields():
    parser = SseParser()
    events = parser.feed(b"event: message\r\nid: 3\r\ndata: a\r\ndata:b\r\n\r\n", 9)
    assert [(e.data, e.t_ns) for e in events] == [("a\nb", 9)]


def test_line_split_exactly_at_newline_boundary():
    parser = SseParser()
    assert parser.feed(b"data: a\n", 1) == []
    events = parser.feed(b"\n", 2)
    assert [(e.data, e.t_ns) for e in events] == [("a", 1)]


def test_blank_lines_without_data_dispatch_nothing():
    parser = SseParser()
    assert parser.feed(b"\n\n\n", 1) == []
    assert not parser.pending


def test_whole_event_reads_with_comments_and_multi_field_blocks_parse_like_the_line_path():
    chunk = b'data: {"a": 1}\n\n: keep-alive\n\ndata: x\ndata: y\n\n\n\ndata: [DONE]\n\n'
    fast = SseParser()
    events = fast.feed(chunk, 5)
    assert [(e.data, e.t_ns) for e in events] == [('{"a": 1}', 5), ("x\ny", 5), ("[DONE]", 5)]
    assert fast.comments == 1 and not fast.pending
    byte_by_byte = SseParser()
    slow = [e for i in range(len(chunk)) for e in byte_by_byte.feed(chunk[i : i + 1], 5)]
    assert [e.data for e in slow] == [e.data for e in events]


def _stream_events() -> bytes:
    role = b'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}\n\n'
    c0 = b'data: {"choices":[{"index":0,"delta":{"content":"a"}}],"usage":{"completion_tokens":2}}\n\n'
    c1 = b'data: {"choices":[{"index":0,"delta":{"reasoning_content":"b"}}],"usage":{"completion_tokens":3}}\n\n'
    end = b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"completion_tokens":5}}\n\n'
    usage = b'data:  {"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":5}} \n\n'  # spaces: json.loads path
    return role + b": keep-alive\n\n" + c0 + c1 + end + usage + b"data: [DONE]\n\n"


def _tally_of(reads: list[tuple[bytes, int]]):
    from servelab.bench.client import _Stream
    from servelab.bench.events import StreamTally

    stream = _Stream(StreamTally())
    for chunk, t_ns in reads:
        stream.feed(chunk, t_ns)
    stream.tally.settle()
    return stream


def test_client_stream_whole_reads_and_byte_reads_give_the_same_exact_tally():
    data = _stream_events()
    whole = _tally_of([(data, 100)])
    assert whole.outcome == (None, None) and whole.ended() == (None, None)
    assert whole.tally.first_token_ns == 100  # the role-only chunk never counts
    assert list(whole.tally.chunk_ns) == [100, 100] and list(whole.tally.chunk_tokens) == [2, 3]
    assert whole.tally.final_usage == {"prompt_tokens": 7, "completion_tokens": 5}
    assert whole.tally.finish_reason == "stop"
    split = _tally_of([(data[i : i + 1], 1000 + i) for i in range(len(data))])
    starts = [
        data.index(b'data: {"choices":[{"index":0,"delta":{"content"'),
        data.index(b'data: {"choices":[{"index":0,"delta":{"reasoning'),
    ]
    assert list(split.tally.chunk_ns) == [1000 + s for s in starts]
    assert list(split.tally.chunk_tokens) == [2, 3] and split.outcome == (None, None)


def test_client_stream_malformed_and_error_events_settle_the_outcome_once():
    bad = _tally_of([(b'data: {"choices": [\n\ndata: {"choices":[{"delta":{"content":"x"}}]}\n\n', 5)])
    assert bad.outcome[0] == "malformed" and not len(bad.tally.chunk_ns)
    extra = _tally_of([(b'data: {"a":1} x\n\n', 5)])
    assert extra.outcome[0] == "malformed"
    err = _tally_of([(b'data: {"error":{"message":"boom"}}\n\n', 5)])
    assert err.outcome == ("http_5xx", "error inside the stream: boom")


def test_client_stream_one_event_per_read_gives_the_same_exact_tally():
    data = _stream_events()
    blocks = [
        block + b"\n\n" for block in data[:-2].split(b"\n\n")
    ]  # role, keep-alive, c0, c1, end, usage, DONE
    each = _tally_of([(block, 100 + i) for i, block in enumerate(blocks)])
    assert each.outcome == (None, None) and each.tally.first_token_ns == 102
    assert list(each.tally.chunk_ns) == [102, 103] and list(each.tally.chunk_tokens) == [2, 3]
    assert each.tally.final_usage == {"prompt_tokens": 7, "completion_tokens": 5}
    assert each.tally.finish_reason == "stop"
    crlf = _tally_of([(b'data: {"choices":[{"delta":{"content":"x"}}]}\r\n\r\n', 9)])
    assert list(crlf.tally.chunk_ns) == [9] and crlf.outcome is None


ODD_READS = [
    b'data: {"choices":[{"delta":{"content":"caf\xc3\xa9"}}]}\n\n',  # UTF-8 text
    b'data: {"choices":[{"delta":{"content":"\xff\xfe"}}]}\n\n',  # invalid UTF-8: json decodes it replaced
    b'data: {"choices":[{"delta":{"content":"\\ud800"}}]}\n\n',  # a lone surrogate, escaped
    b'data: {"choices":[{"delta":{"content":"x"}}],"n":NaN}\n\n',  # NaN: json takes it, orjson does not
    b'data: {"choices":[{"delta":{"content":"x"}}],"n":123456789012345678901234567890}\n\n',  # beyond 64 bits
    b'data: {"a":1,"a":2,"choices":[{"delta":{"content":"x"}}]}\n\n',  # duplicate keys: the last wins
    b'data: {"choices":{"0":{"delta":{"content":"x"}}}}\n\n',  # choices not a list: no token
    b'data: {"choices":["x"]}\n\n',
    b'data: {"choices":[{"delta":{"content":"x"}}]} \n\n',  # trailing space
    b'data: {"usage":{"completion_tokens":1},"choices":[{"delta":{"content":"x"}}]}\n\n',
    b'data: {"choices":[{"delta":{"content":"x"}}]}junk\n\n',
    b'data: {"choices":[{"delta":{"content":"x"}}]\n\n',  # cut short
    b'data: {"choices":[{"delta":{"content":["x"]}}]}\n\n',  # content not a string
    b'data: {"choices":[{"text":{"t":"x"}}]}\n\n',  # text not a string
    # nested 100,000 deep, in the content and beside it: json refuses (RecursionError); orjson 3.8 takes it
    b'data: {"choices":[{"delta":{"content":' + b"[" * 100_000 + b"]" * 100_000 + b"}}]}\n\n",
    b'data: {"x":' + b"[" * 100_000 + b"]" * 100_000 + b',"choices":[{"delta":{"content":"x"}}]}\n\n',
]


def test_client_stream_fast_decoder_and_json_agree_on_every_odd_event():
    """orjson takes the usual one-event read; whatever it refuses goes to json, so the tally and outcome are
    those json alone gives, read by read."""
    from servelab.bench.client import _Stream
    from servelab.bench.events import StreamTally

    for chunk in ODD_READS:
        fast, plain = _Stream(StreamTally()), _Stream(StreamTally())
        plain._fast = None
        for stream in (fast, plain):
            stream.feed(chunk, 7)
            stream.feed(b'data: {"choices":[{"delta":{"content":"y"}}]}\n\n', 8)
        assert fast.outcome == plain.outcome, chunk
        assert list(fast.tally.chunk_ns) == list(plain.tally.chunk_ns), chunk
        assert list(fast.tally.chunk_tokens) == list(plain.tally.chunk_tokens), chunk
        assert fast.tally.final_usage == plain.tally.final_usage, chunk
    cut = _Stream(StreamTally())
    cut.feed(ODD_READS[-1], 7)
    assert cut.outcome[0] == "malformed"
    nan = _Stream(StreamTally())
    nan.feed(ODD_READS[3], 7)
    assert nan.outcome is None and list(nan.tally.chunk_ns) == [7]
    for chunk in ODD_READS[-4:]:  # each a whole read: the hostile server's "nested" answer came back ok
        odd = _Stream(StreamTally())
        odd.feed(chunk, 7)
        assert odd.outcome is not None and odd.outcome[0] == "malformed", chunk[:60]

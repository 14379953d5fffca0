"""The stream parser cannot be turned against us (issue 14.3): any byte stream a server sends, cut into reads
of any size, ends as the same answer whatever the cutting, and no exception leaves the parser (a value of the
wrong type, range or size is a ``malformed`` or ``too_large`` outcome). Property tests run a fixed,
derandomized budget, so CI sees the same cases every run; events are built from the shapes real servers send
(chat chunks, continuous usage, llama.cpp timings, comments, CRLF) with hostile values mixed in."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from servelab.bench.client import _Stream
from servelab.bench.events import StreamTally
from servelab.bench.sse import SseParser, SseTooLarge

BUDGET = settings(
    max_examples=300,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
)
json_value = st.recursive(
    json_leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
count = st.one_of(st.integers(min_value=0, max_value=5000), json_value)


@st.composite
def chat_event(draw) -> bytes:
    """One ``data:`` event of a chat stream, sometimes with a hostile value where a count or text goes."""
    choice: dict = {
        "index": 0,
        "delta": draw(st.one_of(st.just({"content": "tok"}), st.just({}), json_value)),
    }
    if draw(st.booleans()):
        choice["finish_reason"] = draw(st.one_of(st.sampled_from(["length", "stop"]), json_value))
    event: dict = {"choices": draw(st.one_of(st.just([choice]), st.just([]), json_value))}
    if draw(st.booleans()):
        event["usage"] = draw(
            st.one_of(
                st.fixed_dictionaries({"prompt_tokens": count, "completion_tokens": count}),
                st.fixed_dictionaries({"completion_tokens": count}),
                json_value,
            )
        )
    if draw(st.integers(0, 5)) == 0:
        event["timings"] = draw(st.one_of(st.fixed_dictionaries({"predicted_n": count}), json_value))
    if draw(st.integers(0, 9)) == 0:
        event = {"error": draw(json_value)}
    text = json.dumps(event, allow_nan=True)
    return b"data: " + text.encode()


line = st.one_of(
    chat_event(),
    chat_event(),
    chat_event(),
    st.just(b": keep-alive"),
    st.just(b"data: [DONE]"),
    st.just(b"event: message"),
    st.just(b'data:{"choices":[{"delta":{"content":"x"}}]}'),
    st.binary(max_size=20).map(lambda b: b.replace(b"\n", b"")),
    st.just(b"data: " + b"9" * 5000),
    st.just(b'data: {"choices": [[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]}'),
)


@st.composite
def stream(draw) -> bytes:
    """Events separated by blank lines (sometimes two lines to an event), LF or CRLF line ends."""
    parts = []
    for _ in range(draw(st.integers(1, 12))):
        end = draw(st.sampled_from([b"\n", b"\n", b"\r\n"]))
        lines = draw(st.lists(line, min_size=1, max_size=2))
        parts.append(end.join(lines) + end + end)
    return b"".join(parts)


@st.composite
def cut(draw, body: bytes) -> list[bytes]:
    points = sorted(set(draw(st.lists(st.integers(0, len(body)), max_size=8))))
    edges = [0, *points, len(body)]
    return [body[a:b] for a, b in itertools.pairwise(edges) if b > a]


def answer(reads: list[bytes], max_line_bytes: int = 1 << 20) -> tuple:
    """Feed the reads (read i received at time i) and return what the request would store."""
    tally = StreamTally()
    parsed = _Stream(tally, max_line_bytes=max_line_bytes)
    for i, chunk in enumerate(reads):
        parsed.feed(chunk, i)  # must not raise: the client turns any exception into client_error
    tokens = None
    if parsed.outcome is None:
        tally.settle()
        tokens = list(tally.chunk_tokens)
    return parsed.outcome, tokens, tally.finish_reason, tally.done, list(tally.chunk_ns)


@BUDGET
@given(st.data())
def test_any_stream_cut_anywhere_is_the_same_answer_and_never_raises(data) -> None:
    body = data.draw(stream())
    whole = answer([body])
    pieces = data.draw(cut(body))
    outcome, tokens, finish, done, stamps = answer(pieces)
    assert (outcome, tokens, finish, done) == whole[:4]
    assert stamps == sorted(stamps) and all(0 <= t < len(pieces) for t in stamps)
    if outcome is not None and outcome[0] is not None:
        assert outcome[0] in {"malformed", "too_large", "http_5xx"}, outcome


@BUDGET
@given(stream())
def test_a_token_is_stamped_with_the_read_that_held_its_first_byte(body) -> None:
    """Byte by byte: each read is one byte, so each stamp must be the offset where its event starts."""
    reads = [body[i : i + 1] for i in range(len(body))]
    parser = SseParser(1 << 20)
    events = [e for i, r in enumerate(reads) for e in parser.feed(r, i)]
    starts = []
    for i, _ in enumerate(body):
        at_line_start = i == 0 or body[i - 1 : i] == b"\n"
        if at_line_start and body[i : i + 1] not in (b"\n", b"\r", b":"):
            starts.append(i)
    # every event's stamp is the start of one of its field lines, in order
    assert all(e.t_ns in starts for e in events)
    assert [e.t_ns for e in events] == sorted(e.t_ns for e in events)


@BUDGET
@given(st.integers(1, 64), st.binary(min_size=1, max_size=300), st.integers(1, 40))
def test_lines_past_the_limit_raise_only_too_large(limit, junk, step) -> None:
    body = b"data: " + junk.replace(b"\n", b"x") + b"\n\n"
    parser = SseParser(limit)
    try:
        for i in range(0, len(body), step):
            parser.feed(body[i : i + step], i)
    except SseTooLarge:
        assert len(body) - 2 > limit or len(junk) > limit
    tally = StreamTally()
    parsed = _Stream(tally, max_line_bytes=limit)
    for i in range(0, len(body), step):
        parsed.feed(body[i : i + step], i)
    assert parsed.outcome is None or parsed.outcome[0] in {"too_large", "malformed"}


CORPUS = sorted((Path(__file__).parent.parent / "fixtures" / "fuzz-corpus" / "sse").glob("*.txt"))


def test_the_corpus_is_there() -> None:
    assert len(CORPUS) >= 6


@pytest.mark.parametrize("case", CORPUS, ids=lambda p: p.stem)
def test_each_recorded_hostile_stream_ends_as_a_record_however_it_is_cut(case: Path) -> None:
    body = case.read_bytes()
    whole = answer([body])
    assert whole[0] is None or whole[0][0] in {"malformed", "too_large", "http_5xx"}, whole[0]
    for step in (1, 7, 64):
        assert answer([body[i : i + step] for i in range(0, len(body), step)])[:4] == whole[:4]
    if case.stem in {"usage-2-pow-31", "finish-reason-list", "nested-5000", "integer-5000-digits"}:
        assert whole[0] is not None and whole[0][0] == "malformed", whole[0]

"""The client's garbage-collector policy and its pre-encoded request bodies."""

from __future__ import annotations

import asyncio
import gc
import json

from servelab.bench.client import ClientRequest, StreamClient
from servelab.bench.collector import QuietCollector


def test_no_automatic_collection_inside_and_the_previous_state_after():
    assert gc.isenabled()
    with QuietCollector():
        assert not gc.isenabled()
        assert gc.get_freeze_count() > 0  # the heap found on entry is out of the next collection
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0


def test_overlapping_users_leave_switching_back_to_the_one_that_switched_off():
    outer, inner = QuietCollector(), QuietCollector()
    outer.__enter__()
    inner.__enter__()
    inner.__exit__()
    assert not gc.isenabled()  # the outer client is still measuring
    outer.__exit__()
    assert gc.isenabled()


def test_a_collector_already_off_is_left_off():
    gc.disable()
    try:
        with QuietCollector():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_cycles_made_while_quiet_are_collected_once_it_ends():
    with QuietCollector():
        cycle: list = []
        cycle.append(cycle)
        del cycle
    assert gc.collect() >= 1


def test_a_request_sends_its_pre_encoded_payload_or_encodes_its_body():
    body = {"model": "m", "messages": [{"role": "user", "content": "hé"}], "max_tokens": 3, "stream": True}
    plain = ClientRequest(path="/v1/chat/completions", body=body)
    assert json.loads(plain.encoded_body()) == body
    ready = ClientRequest(path="/v1/chat/completions", body=body, payload=b'{"already": "encoded"}')
    assert ready.encoded_body() == b'{"already": "encoded"}'
    assert ready == plain  # the payload is a cache of the body, not part of the request's identity


def test_a_stream_client_is_quiet_while_open_and_leaves_the_collector_as_it_found_it():
    async def inside() -> bool:
        async with StreamClient("http://127.0.0.1:9"):  # nothing is sent: opening makes no connection
            return gc.isenabled()

    assert asyncio.run(inside()) is False
    assert gc.isenabled()

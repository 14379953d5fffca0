"""The sim's fault rule: each --fault counts the requests the ones before it spared, so all kinds compose."""

from __future__ import annotations

from collections import Counter

from servelab.sim.config import fault_for, parse_fault


def _kinds(*specs: str, requests: int) -> list[str | None]:
    faults = tuple(parse_fault(s) for s in specs)
    return [fault_for(faults, n) for n in range(requests)]


def test_one_fault_hits_floor_n_rate_requests_evenly():
    assert _kinds("500:0.5", requests=6) == [None, "500", None, "500", None, "500"]


def test_coinciding_rates_inject_both_kinds():
    kinds = _kinds("500:0.5", "drop:0.5", requests=8)
    assert kinds == [None, "500", "drop", "500", None, "500", "drop", "500"]


def test_each_fault_takes_floor_of_its_rate_of_what_it_sees():
    counts = Counter(_kinds("429:0.25", "refuse:0.5", "stall", requests=1000))
    assert counts == {"429": 250, "refuse": 375, "stall": 375}


def test_a_full_rate_fault_first_leaves_nothing_for_the_rest():
    assert set(_kinds("refuse", "500:0.5", requests=10)) == {"refuse"}

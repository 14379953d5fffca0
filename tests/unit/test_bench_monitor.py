"""When a level is not valid, and what the reason says (bench.monitor.validity)."""

from __future__ import annotations

import os

import pytest

from servelab.bench.monitor import HOST_TOOK_CPU, client_pinned, validity
from servelab.hardware.pinning import on_cpus
from servelab.net import is_loopback_url

CALM = {"wake_late_p99_ms": 0.4, "lag_p99_ms": 0.05, "cpu_fraction": 0.3}


def test_a_calm_client_is_valid() -> None:
    assert validity(CALM, lag_limit_ms=2.0, cpu_limit=0.9) == (True, None)


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (
            {"wake_late_p99_ms": 3.6},
            "client wake-ups p99 3.60 ms late: the host took the CPU away from the client (other "
            "work ran on its CPU: rerun when the host is quieter, with more requests per level)",
        ),
        ({"lag_p99_ms": 2.5}, "client event-loop lag p99 2.50 ms > 2 ms: the client was the bottleneck"),
        ({"cpu_fraction": 0.95}, "client CPU 95% of a core > 90%: the client was the bottleneck"),
    ],
)
def test_each_limit_makes_a_level_not_valid_and_says_which(change: dict, says: str) -> None:
    assert validity({**CALM, **change}, lag_limit_ms=2.0, cpu_limit=0.9) == (False, says)


def test_late_wake_ups_with_the_server_on_this_machine_say_to_pin_them_apart() -> None:
    valid, why = validity(
        {**CALM, "wake_late_p99_ms": 3.6}, lag_limit_ms=2.0, cpu_limit=0.9, server_here=True
    )
    assert not valid and why.endswith(
        "the server runs on this machine: pin the two to different CPUs (taskset -c) "
        "or bench from another machine)"
    )
    assert validity({**CALM, "cpu_fraction": 0.95}, 2.0, 0.9, server_here=True)[1].endswith(
        "was the bottleneck"
    )


def test_a_pinned_client_is_not_told_to_pin_what_the_host_took_away() -> None:
    """The demo pins server and client apart already: the reason says the host took the CPU, and to rerun."""
    valid, why = validity({**CALM, "wake_late_p99_ms": 3.6}, 2.0, 0.9, server_here=True, pinned=True)
    assert not valid and "taskset" not in why and HOST_TOOK_CPU in why and "rerun" in why


def test_client_pinned_reads_this_threads_affinity() -> None:
    everything = os.sched_getaffinity(0)
    if len(everything) < 2:
        pytest.fail("this test needs a machine with two CPUs or more")
    assert client_pinned() is (len(everything) < (os.cpu_count() or 1))
    with on_cpus(frozenset(sorted(everything)[:1])):
        assert client_pinned() is True


@pytest.mark.parametrize(
    ("url", "here"),
    [
        ("http://127.0.0.1:8080", True),
        ("http://localhost:8000/v1", True),
        ("http://[::1]:9000", True),
        ("http://127.8.0.3", True),
        ("http://10.0.0.5:8000", False),
        ("https://api.example.com", False),
        ("http://gpu-box:80", False),
    ],
)
def test_loopback_urls(url: str, here: bool) -> None:
    assert is_loopback_url(url) is here

"""servelab.net: the one answer to "is this address this machine" and the URL fit to print."""

from __future__ import annotations

import pytest

from servelab.net import is_loopback, is_loopback_url, public_url


@pytest.mark.parametrize(
    ("host", "here"),
    [
        ("localhost", True),
        ("LOCALHOST", True),
        ("127.0.0.1", True),
        ("127.8.0.3", True),
        ("::1", True),
        ("[::1]", True),
        ("0.0.0.0", False),
        ("10.0.0.5", False),
        ("::", False),
        ("gpu-box", False),
        ("localhost.example.com", False),
        ("", False),
    ],
)
def test_is_loopback(host: str, here: bool) -> None:
    assert is_loopback(host) is here


def test_is_loopback_url_reads_the_host_and_survives_a_bad_url() -> None:
    assert is_loopback_url("http://user:pw@127.0.0.1:8080/v1")
    assert not is_loopback_url("http://[::1")  # unclosed bracket: not a URL, so not this machine


def test_public_url_drops_credentials_query_and_fragment() -> None:
    assert public_url("http://user:pw@[::1]:9000/v1?key=s#x") == "http://[::1]:9000/v1"
    assert public_url("https://api.example.com") == "https://api.example.com"


def test_public_url_of_a_url_with_a_bad_port_leaves_the_port_out() -> None:
    assert public_url("http://u:p@127.0.0.1:99999/x") == "http://127.0.0.1/x"

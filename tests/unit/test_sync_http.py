"""servelab.sync_http against a real server on loopback: statuses are answers, one error mapping."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from servelab.errors import ConfigError, TargetError
from servelab.sync_http import request


@pytest.fixture
def server() -> Iterator[tuple[str, list[dict[str, str]]]]:
    seen: list[dict[str, str]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append({"path": self.path, **{k.lower(): v for k, v in self.headers.items()}})
            if self.path == "/moved":
                self.send_response(302)
                self.send_header("Location", "/body")
                self.end_headers()
                return
            if self.path != "/body":
                self.send_error(404 if self.path != "/busy" else 503)
                return
            self.send_response(200)
            self.send_header("Content-Length", "10")
            self.end_headers()
            self.wfile.write(b"0123456789")

        do_POST = do_GET

        def log_message(self, *args: object) -> None:
            return

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", seen
    httpd.shutdown()
    httpd.server_close()


def test_a_2xx_answer_carries_body_and_headers(server) -> None:
    url, _ = server
    answer = request(url + "/body")
    assert (answer.status, answer.ok, answer.body, answer.headers["Content-Length"]) == (
        200,
        True,
        b"0123456789",
        "10",
    )
    assert request(url + "/body", limit=4).body == b"0123"


@pytest.mark.parametrize(("path", "status"), [("/missing", 404), ("/busy", 503)])
def test_error_statuses_are_answers_not_exceptions(server, path: str, status: int) -> None:
    url, _ = server
    answer = request(url + path)
    assert (answer.status, answer.ok, answer.body) == (status, False, b"")


def test_a_redirect_is_refused_by_default_and_names_where_it_pointed(server) -> None:
    url, seen = server
    with pytest.raises(TargetError) as caught:
        request(url + "/moved")
    assert str(caught.value) == (
        f"{url}/moved answered HTTP 302, a redirect to {url}/body; redirects are not followed"
    )
    assert len(seen) == 1


def test_a_followed_redirect_drops_private_headers(server) -> None:
    url, seen = server
    answer = request(
        url + "/moved",
        headers={"X-Plain": "p"},
        private_headers={"Authorization": "Bearer k"},
        redirects="same-origin",
    )
    assert answer.body == b"0123456789"
    assert seen[0]["authorization"] == "Bearer k" and seen[0]["x-plain"] == "p"
    assert "authorization" not in seen[1] and seen[1]["x-plain"] == "p"


def test_post_sends_the_body(server) -> None:
    url, seen = server
    assert request(url + "/body", body=b"{}", headers={"Content-Type": "application/json"}).ok
    assert seen[0]["content-length"] == "2"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_unreachable_server_is_a_target_error_without_credentials() -> None:
    port = _closed_port()
    with pytest.raises(TargetError) as caught:
        request(f"http://user:hunter2@127.0.0.1:{port}/v1/models", hint="is the server running?")
    message = str(caught.value)
    assert message.startswith(f"cannot reach http://127.0.0.1:{port}/v1/models: ")
    assert message.endswith("; is the server running?") and "hunter2" not in message


@pytest.mark.parametrize("url", ["ftp2://127.0.0.1/x", "not a url"])
def test_a_url_urllib_cannot_use_is_a_config_error(url: str) -> None:
    with pytest.raises(ConfigError, match="not a usable URL"):
        request(url)


def test_a_port_out_of_range_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="not a usable URL"):
        request("http://127.0.0.1:99999/health")

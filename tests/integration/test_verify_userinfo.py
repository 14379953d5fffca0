"""A URL with user:password (a server behind a reverse proxy with basic auth) is reached, and the password
never appears in what servelab prints."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from servelab.cli.app import main

EXPECTED = "Basic " + base64.b64encode(b"me:hunter2").decode()


class _BasicAuthModels(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.headers.get("Authorization") != EXPECTED:
            self.send_response(401)
            self.end_headers()
            return
        body = json.dumps({"object": "list", "data": [{"id": "behind-proxy", "object": "model"}]}).encode()
        code = 200 if self.path == "/v1/models" else 404
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body) if code == 200 else 0))
        self.end_headers()
        if code == 200:
            self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[int]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _BasicAuthModels)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd.server_address[1]
    httpd.shutdown()
    httpd.server_close()


def test_credentials_in_the_url_are_sent_as_basic_auth_and_never_printed(server: int, capsys) -> None:
    assert main(["verify", f"http://me:hunter2@127.0.0.1:{server}", "--json"]) == 0
    out, err = capsys.readouterr()
    result = json.loads(out)
    assert result["engine"] == "openai" and result["effective"]["model"] == "behind-proxy"
    assert result["url"] == f"http://127.0.0.1:{server}" and "hunter2" not in out + err

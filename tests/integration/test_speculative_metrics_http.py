"""Acceptance read from a live /metrics on loopback (a real HTTP server in a thread), alone and through the CLI."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from servelab.cli.app import main
from servelab.speculative import sources

# Exposition text in each engine's metric names (vllm/v1/spec_decode/metrics.py, sglang collector.py,
# llama.cpp tools/server): numbers chosen so the expected accept length is easy to check by hand.
VLLM_METRICS = """# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 1000.0
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 2000.0
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 1625.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="0"} 885.0
"""
SGLANG_METRICS = """# TYPE sglang:spec_accept_length gauge
sglang:spec_accept_length{model_name="m",tp_rank="0"} 1.5
sglang:spec_accept_length{model_name="m",tp_rank="1"} 1.7
"""


@pytest.fixture
def metrics_server():
    """A real HTTP server on 127.0.0.1 that serves the exposition text the test sets."""
    body = {"text": ""}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            data = body["text"].encode()
            self.send_response(200 if self.path == "/metrics" else 404)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield body, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_vllm_metrics_over_http(metrics_server):
    body, url = metrics_server
    body["text"] = VLLM_METRICS
    acceptance = sources.pool_acceptance(sources.observations_from_metrics(url), "metrics", None)
    assert (acceptance.engine, acceptance.draft_tokens) == ("vllm", 2)
    assert acceptance.accept_length == pytest.approx(2.625)


def test_sglang_metrics_through_the_cli(metrics_server, capsys):
    body, url = metrics_server
    body["text"] = SGLANG_METRICS
    assert main(["spec", "--metrics-url", url, "--draft-tokens", "3", "--draft-cost", "0.05", "--json"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    result = json.loads(out)
    assert result["expected_tokens_per_step"] == pytest.approx(1.6)
    assert result["engine"] == "sglang"


def test_metrics_without_speculation_is_a_clear_error(metrics_server, capsys):
    body, url = metrics_server
    body["text"] = "vllm:num_requests_running 0\n"
    assert main(["spec", "--metrics-url", url]) == 2
    assert "no speculative-decoding numbers found in the metrics" in capsys.readouterr().err

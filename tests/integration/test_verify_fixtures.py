"""sglang, vLLM and Ollama verify paths against reconstructed endpoint bodies served over real HTTP.

The fixtures (tests/fixtures/endpoints, see its README) are served on 127.0.0.1 by a small http.server
thread, so detection, reading and the CLI go through the same urllib path as against a live engine.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from servelab.cli.app import main
from servelab.engines.detect import detect_engine
from servelab.engines.sglang.reported import SglangReported
from servelab.errors import TargetError
from servelab.verify import parse_expect, read_effective, verify

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "endpoints"


class _FixtureHandler(BaseHTTPRequestHandler):
    root: Path
    seen: list[tuple[str, str, str | None]]
    required_key: str | None = None
    fixed_status: int | None = None  # answer every request with this status (503: a server still loading)

    def do_GET(self) -> None:
        self._answer("GET")

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        if self.path == "/api/show" and not body.get("model"):
            self._send(400, b'{"error": "model is required"}', "application/json")
            return
        self._answer("POST")

    def _answer(self, method: str) -> None:
        self.seen.append((method, self.path, self.headers.get("Authorization")))
        if self.fixed_status:
            self._send(
                self.fixed_status, b'{"error": {"code": 503, "message": "Loading model"}}', "application/json"
            )
            return
        if self.required_key and self.headers.get("Authorization") != f"Bearer {self.required_key}":
            self._send(401, b'{"error": "invalid api key"}', "application/json")
            return
        name = self.path.strip("/").replace("/", "_")
        for suffix, kind in ((".json", "application/json"), (".txt", "text/plain")):
            path = self.root / (name + suffix)
            if path.is_file():
                self._send(200, _body(path), kind)
                return
        self._send(404, b'{"detail": "Not Found"}', "application/json")

    def _send(self, status: int, body: bytes, kind: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def _body(path: Path) -> bytes:
    if path.suffix != ".json":
        return path.read_bytes()
    data = json.loads(path.read_text())
    if isinstance(data, dict):
        data.pop("_source", None)
    return json.dumps(data).encode()


class FixtureServer:
    def __init__(
        self, scenario: str, required_key: str | None = None, fixed_status: int | None = None
    ) -> None:
        attributes = {
            "root": FIXTURES / scenario,
            "seen": [],
            "required_key": required_key,
            "fixed_status": fixed_status,
        }
        handler = type("Handler", (_FixtureHandler,), attributes)
        self.handler = handler
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)

    @property
    def seen(self) -> list[tuple[str, str, str | None]]:
        return self.handler.seen


@pytest.fixture
def serve_fixture() -> Iterator:
    servers: list[FixtureServer] = []

    def start(
        scenario: str, required_key: str | None = None, fixed_status: int | None = None
    ) -> FixtureServer:
        server = FixtureServer(scenario, required_key, fixed_status)
        server.thread.start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.httpd.shutdown()
        server.httpd.server_close()


def test_every_fixture_states_its_source() -> None:
    for path in FIXTURES.rglob("*.json"):
        assert "_source" in json.loads(path.read_text()), path
    for path in FIXTURES.rglob("*.txt"):
        assert path.read_text().startswith("# Source:"), path


# --- sglang -------------------------------------------------------------------------------------------


def test_sglang_detected_with_version_and_model(serve_fixture) -> None:
    server = serve_fixture("sglang/awq-262k")
    found = detect_engine(server.url)
    assert (found.name, found.version, found.models) == ("sglang", "0.5.9", ("/models/Qwen3.5-27B-AWQ",))


def test_sglang_effective_config_fields(serve_fixture) -> None:
    got = read_effective(serve_fixture("sglang/awq-262k").url)
    assert got.engine == "sglang"
    assert (got.context_per_slot, got.max_total_tokens, got.own.max_request_input_tokens) == (
        262144,
        262144,
        262138,
    )
    assert (got.kv_cache_dtype, got.own.mem_fraction_static, got.tp_size) == ("fp8_e5m2", 0.9, 1)
    assert got.own == SglangReported(0.9, 262138, "awq")  # what only sglang reports, typed
    assert got.speculative == {"enabled": False}


def test_sglang_field_report_config_verifies_clean(serve_fixture) -> None:
    server = serve_fixture("sglang/awq-262k")
    cmd = (
        "python -m sglang.launch_server --model-path /models/Qwen3.5-27B-AWQ --quantization awq "
        "--context-length 262144 --max-total-tokens 262144 --kv-cache-dtype fp8_e5m2 --mem-fraction-static 0.9"
    )
    assert main(["verify", server.url, "--cmd", cmd, "--strict"]) == 0


def test_sglang_pool_smaller_than_context_is_a_mismatch_with_cause(serve_fixture) -> None:
    server = serve_fixture("sglang/tp2-pool-short")
    result = verify(server.url, parse_expect(["context=262144", "tp_size=2", "speculative=true"]))
    assert [m.key for m in result.mismatches] == ["context"]
    (context,) = result.mismatches
    assert context.got == 151296
    assert "KV pool holds only 151296 tokens" in context.why
    assert "--mem-fraction-static (now 0.85)" in context.fix
    assert set(result.matched) == {"tp_size", "speculative"}


def test_sglang_server_api_key_never_reaches_the_output(serve_fixture, capsys) -> None:
    server = serve_fixture("sglang/tp2-pool-short")
    assert main(["verify", server.url, "--json", "--api-key", "sk-client-key"]) == 0
    out = capsys.readouterr().out
    assert "sk-fixture-server-secret" not in out and "sk-client-key" not in out
    assert json.loads(out)["raw"]["server_info"]["api_key"] == "<redacted>"
    assert all(auth == "Bearer sk-client-key" for _, _, auth in server.seen)


# --- vLLM ---------------------------------------------------------------------------------------------


def test_vllm_detected_and_cache_config_read(serve_fixture) -> None:
    server = serve_fixture("vllm/fp8-ignored")
    assert detect_engine(server.url).name == "vllm"
    got = read_effective(server.url)
    assert (got.context_per_slot, got.model, got.version) == (32768, "qwen3-30b-instruct", "0.7.3")
    assert got.kv_cache_dtype == "auto"
    assert got.max_total_tokens == 81767 * 16
    assert got.own.gpu_memory_utilization == 0.9


def test_vllm_ignored_fp8_kv_cache_is_caught(serve_fixture, capsys) -> None:
    server = serve_fixture("vllm/fp8-ignored")
    cmd = "vllm serve /models/Qwen3-30B-A3B-Instruct-2507-AWQ --served-model-name qwen3-30b-instruct --kv-cache-dtype fp8 --max-model-len 65536"
    code = main(["verify", server.url, "--cmd", cmd, "--json", "--strict"])
    out = json.loads(capsys.readouterr().out)
    assert code == 1
    by_key = {m["key"]: m for m in out["mismatches"]}
    assert set(by_key) == {"kv_dtype", "context"}
    assert by_key["kv_dtype"]["got"] == "auto" and "cache_dtype auto" in by_key["kv_dtype"]["why"]
    assert by_key["context"]["why"].startswith("max_model_len is 32768, not 65536")
    assert "model" in out["matched"]


# --- Ollama -------------------------------------------------------------------------------------------


def test_ollama_served_window_versus_training_context(serve_fixture) -> None:
    server = serve_fixture("ollama/num-ctx-default")
    assert detect_engine(server.url).models == ("llama3.2:latest",)
    result = verify(server.url, parse_expect(["context=32768"]))
    effective = result.effective
    assert (effective.context_per_slot, effective.context_train, effective.own.gpu_fraction) == (
        4096,
        131072,
        0.8,
    )
    (m,) = result.mismatches
    assert "Ollama serves a 4096-token window (the model was trained for 131072)" in m.why
    assert "num_ctx 32768" in m.fix
    assert result.notes == (
        "20% of the loaded model runs on the CPU (size_vram < size): expect CPU-bound speed; "
        "lower num_ctx or use a smaller quantization to fit the GPU",
    )
    assert ("POST", "/api/show", None) in server.seen


def test_ollama_named_model_short_name(serve_fixture) -> None:
    server = serve_fixture("ollama/num-ctx-default")
    result = verify(server.url, parse_expect(["model=llama3.2", "context=4096"]))
    assert result.mismatches == () and set(result.matched) == {"model", "context"}
    assert ("POST", "/api/show", None) in server.seen


def test_vllm_named_lora_adapter_has_no_length_of_its_own(serve_fixture) -> None:
    server = serve_fixture("vllm/fp8-ignored")
    result = verify(server.url, parse_expect(["model=sql-lora", "context=32768"]))
    assert result.effective.model == "sql-lora"
    assert [u.key for u in result.unverified] == ["context"] and result.mismatches == ()


def test_ollama_idle_context_is_unverified_not_a_mismatch(serve_fixture, capsys) -> None:
    server = serve_fixture("ollama/idle")
    assert main(["verify", server.url, "--expect", "context=8192", "--strict"]) == 0
    out = capsys.readouterr().out
    assert "UNVERIFIED context=8192" in out and "send it one request first" in out


# --- detection edges ----------------------------------------------------------------------------------


def test_generic_openai_server_is_the_fallback(serve_fixture) -> None:
    server = serve_fixture("openai/plain")
    found = detect_engine(server.url + "/")
    assert (found.name, found.version, found.models) == ("openai", None, ("qwen3.5-27b-ptq1",))
    result = verify(server.url, parse_expect(["context=8192", "slots=2"]))
    assert result.mismatches == ()
    assert {u.key for u in result.unverified} == {"context", "slots"}


def test_a_server_without_a_version_is_titled_cleanly(serve_fixture, capsys) -> None:
    server = serve_fixture("openai/plain")
    assert main(["verify", server.url]) == 0
    assert capsys.readouterr().out.startswith(f"openai at {server.url}\n")


def test_server_that_is_not_openai_compatible(serve_fixture, capsys) -> None:
    server = serve_fixture("none/empty")
    with pytest.raises(TargetError, match="is not an OpenAI-compatible server"):
        detect_engine(server.url)
    assert main(["verify", server.url]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and "not an OpenAI-compatible server" in captured.err


def test_server_still_loading_says_so(serve_fixture) -> None:
    server = serve_fixture("none/empty", fixed_status=503)  # llama-server's answer while it loads the model
    with pytest.raises(TargetError, match="is still loading"):
        detect_engine(server.url)


def test_wrong_api_key_is_named_without_echoing_it(serve_fixture, capsys) -> None:
    server = serve_fixture("openai/plain", required_key="right-key")
    assert main(["verify", server.url, "--api-key", "wrong-key"]) == 1
    err = capsys.readouterr().err
    assert "refused access (HTTP 401); pass the server's key with --api-key" in err and "wrong-key" not in err
    assert main(["verify", server.url, "--api-key", "right-key", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["engine"] == "openai"


def test_unreachable_url_and_credentials_in_url_stay_out_of_messages(capsys) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    assert main(["verify", f"http://user:hunter2@127.0.0.1:{port}"]) == 1
    err = capsys.readouterr().err
    assert f"cannot reach http://127.0.0.1:{port}" in err and "hunter2" not in err
    assert main(["verify", "ftp://127.0.0.1/"]) == 2
    assert "not an http(s) URL" in capsys.readouterr().err

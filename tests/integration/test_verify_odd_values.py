"""`verify` against servers whose info endpoints put a dict or a list where a string or a number belongs:
one line or a clean result, never a traceback (issue 26.4). The values are checked at the edge, in each
engine's endpoints.py."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from servelab.cli.app import main

ODD = ({"a": [1, {"b": 2}]}, [1, "x", None], {"nested": {"deeper": ["v"]}})


@contextlib.contextmanager
def json_server(bodies: dict[str, object]) -> Iterator[str]:
    """A loopback server answering GET PATH with the JSON ``bodies[PATH]`` (404 for any other path)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # http.server's name
            if self.path not in bodies:
                self.send_error(404)
                return
            data = json.dumps(bodies[self.path]).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _llamacpp(**props: object) -> dict[str, object]:
    base = {
        "default_generation_settings": {"n_ctx": 4096},
        "total_slots": 1,
        "build_info": "b5000-abc",
        "model_path": "/m/model.gguf",
    }
    return {
        "/props": {**base, **props},
        "/v1/models": {"data": [{"id": "model.gguf", "meta": {"n_ctx_train": 8192}}]},
        "/health": {"status": "ok"},
        "/slots": [{"id": 0, "n_ctx": 4096}],
    }


def _sglang(**info: object) -> dict[str, object]:
    base = {
        "tp_size": 1,
        "max_total_num_tokens": 100000,
        "max_running_requests": 8,
        "context_length": 4096,
        "model_path": "Qwen/Qwen3-8B",
        "version": "0.4.6",
        "kv_cache_dtype": "auto",
        "mem_fraction_static": 0.8,
        "max_req_input_len": 4090,
    }
    return {
        "/get_server_info": {**base, **info},
        "/get_model_info": {"model_path": "Qwen/Qwen3-8B"},
        "/v1/models": {"data": [{"id": "Qwen/Qwen3-8B"}]},
    }


def _vllm(**entry: object) -> dict[str, object]:
    base = {"id": "Qwen/Qwen3-8B", "owned_by": "vllm", "max_model_len": 4096}
    return {"/v1/models": {"data": [{**base, **entry}]}, "/version": {"version": "0.8.5"}, "/metrics": {}}


CASES = [
    *(
        ("llamacpp", _llamacpp(**{key: odd}))
        for key in ("build_info", "model_alias", "total_slots", "kv_unified")
        for odd in ODD
    ),
    ("llamacpp", _llamacpp(default_generation_settings={"n_ctx": {"x": 1}, "speculative": [1]})),
    *(
        ("sglang", _sglang(**{key: odd}))
        for key in (
            "max_total_num_tokens",
            "max_running_requests",
            "max_req_input_len",
            "context_length",
            "tp_size",
            "mem_fraction_static",
            "version",
            "kv_cache_dtype",
            "quantization",
            "served_model_name",
            "speculative_algorithm",
        )
        for odd in ODD
    ),
    *(("vllm", _vllm(max_model_len=odd)) for odd in ODD),
    ("vllm", {**_vllm(), "/version": {"version": {"v": [1]}}}),
]


@pytest.mark.parametrize("as_json", [True, False], ids=["json", "terminal"])
@pytest.mark.parametrize("engine, bodies", CASES)
def test_verify_reads_odd_values_without_a_traceback(
    engine: str, bodies: dict, as_json: bool, capsys
) -> None:
    with json_server(bodies) as url:
        code = main(["verify", url, "--expect", "context=4096", *(["--json"] if as_json else [])])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err and code in (0, 1, 2), captured.err
    if code != 0:
        assert captured.err.count("\n") == 1, captured.err
    elif as_json:
        assert json.loads(captured.out)["engine"] == engine
    else:
        assert engine in captured.out.replace(".", "")

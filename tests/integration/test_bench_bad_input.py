"""`servelab bench` refuses bad input with one line and no load sent; the API key is never stored."""

from __future__ import annotations

import http.server
import socket
import threading

import pytest

from servelab.cli.app import main
from tests.bench_sim import sim_process, sim_requests_seen


def one_line_error(capsys, argv: list[str], code: int) -> str:
    assert main(argv) == code
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in captured.err
    return lines[0]


def test_unreachable_url_is_one_line_exit_1(capsys):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    line = one_line_error(capsys, ["bench", f"http://127.0.0.1:{port}", "--requests", "1"], 1)
    assert "cannot reach" in line and str(port) in line


def test_a_server_that_is_not_openai_compatible_is_refused(capsys):
    class NotFound(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_error(404)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), NotFound)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        line = one_line_error(
            capsys, ["bench", f"http://127.0.0.1:{server.server_port}", "--requests", "1"], 1
        )
    finally:
        server.shutdown()
    assert "not an OpenAI-compatible server" in line


def test_a_model_the_server_lacks_sends_no_load(capsys):
    with sim_process("--model", "served-model") as url:
        line = one_line_error(capsys, ["bench", url, "--model", "other-model", "--requests", "1"], 2)
        assert sim_requests_seen(url) == 0
    assert "does not serve model 'other-model'" in line and "served-model" in line


def test_a_workload_longer_than_the_context_sends_no_load(capsys):
    with sim_process("--context", "256") as url:
        line = one_line_error(capsys, ["bench", url, "--input-tokens", "1000", "--requests", "1"], 2)
        assert sim_requests_seen(url) == 0
    assert "context is 256" in line


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--concurrency", "0,2"], "positive integers"),
        (["--workload", "nonsense"], "unknown workload 'nonsense'"),
        (["--slo", "speed=3"], "unknown SLO 'speed'"),
        (["--requests", "5", "--duration", "3"], "not both"),
        (["--repeat", "0"], "--repeat must be a whole number from 1 to 1,000, got 0"),
        (
            ["--output-tokens", "0"],
            "--output-tokens must be a whole number from 1 to 1,000,000 tokens, got 0",
        ),
        (
            ["--input-tokens", "-3"],
            "--input-tokens must be a whole number from 1 to 10,000,000 tokens, got -3",
        ),
        (["--rate", "nan"], "--rate must be a number from 0.001 to 1,000,000 requests/s, got nan"),
        (["--rate", "inf"], "--rate must be a number from 0.001 to 1,000,000 requests/s, got inf"),
        (["--rate", "1e-9"], "--rate must be a number from 0.001 to 1,000,000 requests/s, got 1e-09"),
        (["--rate", "0.001", "--requests", "100"], "--rate 0.001 would take 100,000 s to send 100 requests"),
        (
            ["--burstiness", "nan"],
            "--burstiness must be a number above 0 and at most 1,000 (or inf), got nan",
        ),
        (["--burstiness", "0"], "--burstiness must be a number above 0 and at most 1,000 (or inf), got 0.0"),
        (["--duration", "nan"], "--duration must be a number above 0 and at most 86,400 seconds, got nan"),
        (["--duration", "-1"], "--duration must be a number above 0 and at most 86,400 seconds, got -1.0"),
        (["--requests", "0"], "--requests must be a whole number from 1 to 1,000,000 per level, got 0"),
        (["--requests", "1000000000000"], "--requests must be a whole number from 1 to 1,000,000 per level"),
        (["--concurrency", "1,1000000"], "--concurrency must be a whole number from 1 to 10,000 requests in"),
        (
            ["--warmup", "-1"],
            "--warmup must be a whole number from 0 to 1,000,000 requests per level, got -1",
        ),
        (["--max-errors", "-1"], "--max-errors must be a whole number from 0 to 1,000,000, got -1"),
        (["--seed", "-1"], "--seed must be a whole number from 0 to 4,294,967,295, got -1"),
        (["--temperature", "-0.5"], "--temperature must be a number from 0 to 100 (0 = greedy), got -0.5"),
        (["--temperature", "nan"], "--temperature must be a number from 0 to 100 (0 = greedy), got nan"),
        (
            ["--slo", "ttft_ms=nan"],
            "--slo ttft_ms must be a number above 0 and at most 86,400,000 ms, got nan",
        ),
        (
            ["--slo", "tpot_ms=-5"],
            "--slo tpot_ms must be a number above 0 and at most 86,400,000 ms, got -5.0",
        ),
    ],
)
def test_bad_options_are_usage_errors(capsys, args, message):
    line = one_line_error(capsys, ["bench", "http://127.0.0.1:9", *args], 2)
    assert message in line


def test_api_key_reaches_the_server_but_never_the_store(capsys, tmp_path):
    db = tmp_path / "runs.db"
    with sim_process("--itl-ms", "5", "--ttft-ms", "5") as url:
        code = main(
            [
                "bench",
                url,
                "--concurrency",
                "1",
                "--requests",
                "2",
                "--output-tokens",
                "4",
                "--api-key",
                "sk-very-secret-123",
                "--db",
                str(db),
                "--json",
            ]
        )
    assert code == 0
    out = capsys.readouterr().out
    assert "sk-very-secret-123" not in out
    for path in tmp_path.iterdir():
        assert b"sk-very-secret-123" not in path.read_bytes()


def test_an_experiment_file_that_is_not_text_is_one_line(capsys, tmp_path):
    garbage = tmp_path / "experiment.yaml"
    garbage.write_bytes(bytes(range(256)) * 4)
    line = one_line_error(capsys, ["bench", "http://127.0.0.1:9", "--config", str(garbage)], 2)
    assert f"--config {garbage}: not a YAML text file (not UTF-8)" in line


def test_credentials_in_the_url_never_reach_the_store(capsys, tmp_path):
    db = tmp_path / "runs.db"
    with sim_process("--itl-ms", "5", "--ttft-ms", "5") as url:
        secret_url = url.replace("http://", "http://user:pw-very-secret-456@")
        code = main(
            [
                "bench",
                secret_url,
                "--concurrency",
                "1",
                "--requests",
                "1",
                "--output-tokens",
                "2",
                "--db",
                str(db),
                "--json",
            ]
        )
    assert code == 0
    assert "pw-very-secret-456" not in capsys.readouterr().out
    for path in tmp_path.iterdir():
        assert b"pw-very-secret-456" not in path.read_bytes()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--fault", "explode"], "unknown fault 'explode'"),
        (["--fault", "500:2"], "outside (0, 1]"),
        (["--usage", "sometimes"], "unknown usage mode"),
        (["--tokens-per-chunk", "0"], "--tokens-per-chunk must be a whole number from 1 to 1,000,000, got 0"),
        (["--host", ""], "--host is empty (that would bind every interface)"),
        (["--host", " "], "--host is empty"),
        (["--ttft-ms", "nan"], "--ttft-ms must be a number from 0 to 3,600,000 ms, got nan"),
        (["--itl-ms", "inf"], "--itl-ms must be a number from 0 to 3,600,000 ms, got inf"),
        (["--keepalive-ms", "-5"], "--keepalive-ms must be a number above 0 and at most 3,600,000 ms"),
        (["--eos-after", "-1"], "--eos-after must be a whole number from 1 to 1,000,000 tokens, got -1"),
        (["--context", "1"], "--context must be a whole number from 2 to 10,000,000 tokens, got 1"),
    ],
)
def test_sim_bad_options_are_usage_errors(capsys, args, message):
    line = one_line_error(capsys, ["sim", "--port", "0", *args], 2)
    assert message in line


def test_sim_on_a_busy_port_is_one_line(capsys):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        line = one_line_error(capsys, ["sim", "--port", str(busy.getsockname()[1])], 2)
    assert "cannot listen on 127.0.0.1" in line


@pytest.mark.parametrize(
    ("yaml_text", "message"),
    [
        (
            "targets: 5\n",
            "targets in {path} must be a URL or a list of URLs (or of mappings with a url), got 5",
        ),
        ("targets: [{name: a}]\n", "must be a URL or a list of URLs"),
        ("targets: [http://127.0.0.1:9]\nrequests: lots\n", "--requests must be a whole number from 1 to"),
        ("targets: [http://127.0.0.1:9]\nrate: .nan\n", "--rate must be a number from 0.001 to 1,000,000"),
        (
            "targets: [http://127.0.0.1:9]\nrepeat: true\n",
            "--repeat must be a whole number from 1 to 1,000, got True",
        ),
        ("targets: [http://127.0.0.1:9]\nburstiness: 0\n", "--burstiness must be a number above 0"),
        ("targets: [http://127.0.0.1:9]\nslo: {ttft_ms: -1}\n", "--slo ttft_ms must be a number above 0"),
        ("targets: [http://127.0.0.1:9]\nslo: {speed: 1}\n", "unknown SLO 'speed'"),
        ("targets: [http://127.0.0.1:9]\nchat: maybe\n", "chat in {path} must be true or false, got 'maybe'"),
        (
            "targets: [http://127.0.0.1:9]\nmodel: {a: 1}\n",
            "model in {path} must be a string, got {{'a': 1}}",
        ),
    ],
)
def test_an_experiment_with_nonsense_values_is_one_line(capsys, tmp_path, yaml_text, message):
    experiment = tmp_path / "experiment.yaml"
    experiment.write_text(yaml_text)
    line = one_line_error(capsys, ["bench", "--config", str(experiment)], 2)
    assert message.format(path=experiment) in line


def test_a_whole_float_from_yaml_counts_as_a_whole_number(capsys, tmp_path):
    experiment = tmp_path / "experiment.yaml"
    experiment.write_text("targets: [http://127.0.0.1:9]\nrequests: 8.0\nrepeat: 2.5\n")
    line = one_line_error(capsys, ["bench", "--config", str(experiment)], 2)
    assert line == "servelab: error: --repeat must be a whole number from 1 to 1,000, got 2.5"


def test_a_level_where_every_request_failed_exits_1_and_says_so(capsys, tmp_path):
    with sim_process("--ttft-ms", "1", "--itl-ms", "1", "--fault", "500") as url:
        code = main(
            [
                "bench",
                url,
                "--concurrency",
                "1",
                "--requests",
                "3",
                "--output-tokens",
                "2",
                "--input-tokens",
                "4",
                "--warmup",
                "0",
                "--db",
                str(tmp_path / "r.db"),
            ]
        )
    captured = capsys.readouterr()
    assert code == 1
    assert "complete" not in captured.out and "every request of a level failed" in captured.out
    (line,) = [x for x in captured.err.splitlines() if x.startswith("servelab: error:")]
    assert line.startswith(f"servelab: error: every request failed at {url} c=1 (") and "(run " in line


def test_a_level_where_some_requests_failed_still_exits_0(capsys, tmp_path):
    with sim_process("--ttft-ms", "1", "--itl-ms", "1", "--fault", "500:0.5") as url:
        code = main(
            [
                "bench",
                url,
                "--concurrency",
                "1",
                "--requests",
                "4",
                "--output-tokens",
                "2",
                "--input-tokens",
                "4",
                "--warmup",
                "0",
                "--db",
                str(tmp_path / "r.db"),
            ]
        )
    assert code == 0 and "complete" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["demo", "--threads", "0"], "--threads must be a whole number from 1 to 1,024 threads, got 0"),
        (["demo", "--threads", "99999999999"], "--threads must be a whole number from 1 to 1,024"),
        (
            ["demo", "--requests", "0"],
            "--requests must be a whole number from 1 to 1,000,000 per level, got 0",
        ),
        (["export", "r", "--level", "c=1", "--target", "-1"], "--target must be a whole number from 0 to"),
    ],
)
def test_demo_and_export_numbers_are_checked_before_anything_runs(capsys, tmp_path, args, message):
    """The demo refuses nonsense before it builds a model or starts a server; export before it opens a store."""
    line = one_line_error(
        capsys, [*args, *(["--workdir", str(tmp_path / "w")] if args[0] == "demo" else [])], 2
    )
    assert message in line
    assert not (tmp_path / "w").exists()


def test_a_workload_the_server_rejects_is_one_line_without_a_traceback(capsys, tmp_path):
    """Every prompt of a workload file answered 400 (a context limit the server enforces): one line, exit 1."""

    class Rejecting(http.server.BaseHTTPRequestHandler):
        def _json(self, status: int, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            self._json(200, b'{"object": "list", "data": [{"id": "m", "object": "model"}]}')

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self._json(
                400,
                b'{"error": {"message": "maximum context length is 8 tokens", "type": "invalid_request_error"}}',
            )

        def log_message(self, *args):
            pass

    workload = tmp_path / "prompts.jsonl"
    workload.write_text('{"prompt": "one two three four five six seven eight nine", "max_tokens": 4}\n')
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Rejecting)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        code = main(
            [
                "bench",
                f"http://127.0.0.1:{server.server_port}",
                "--workload",
                str(workload),
                "--concurrency",
                "1",
                "--requests",
                "2",
                "--warmup",
                "0",
                "--db",
                str(tmp_path / "r.db"),
            ]
        )
    finally:
        server.shutdown()
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err
    (line,) = [x for x in err.splitlines() if x.startswith("servelab: error:")]
    assert "every request failed" in line or "rejected" in line or "400" in line, line

"""`servelab logs` through the real CLI entry point, and --follow on a growing file."""

from __future__ import annotations

import io
import json
import threading
import time
from pathlib import Path

from servelab.cli.app import main
from servelab.diagnose.logs import follow
from servelab.diagnose.signatures import load_signatures

FIXTURES = Path(__file__).parent.parent / "fixtures" / "logs"
SGLANG_LOG = FIXTURES / "sglang" / "sglang-server.log"


def test_json_output_has_the_interface_fields(capsys):
    assert main(["logs", str(SGLANG_LOG), "--json"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    findings = json.loads(out)["findings"]
    first = findings[0]
    assert {"id", "engine", "severity", "line", "text", "meaning", "fix"} <= set(first)
    assert first["severity"] == "critical"
    by_id = {f["id"]: f for f in findings}
    assert by_id["sglang.context.input_too_long"]["line"] == 7
    assert "160062" in by_id["sglang.context.input_too_long"]["meaning"]


def test_text_output_names_severity_and_location(capsys):
    assert main(["logs", str(SGLANG_LOG)]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert f"CRITICAL sglang.context.input_too_long [sglang] {SGLANG_LOG}:7" in out
    assert "fix:" in out


def test_stdin_dash(capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO("x\nNCCL INFO NCCL_P2P_DISABLE set by environment to 1\n"))
    assert main(["logs", "-", "--json"]) == 0
    out, _ = capsys.readouterr()
    (finding,) = json.loads(out)["findings"]
    assert (finding["id"], finding["line"], finding["file"]) == ("nccl.env.p2p_disable", 2, "-")


def test_engine_filter(capsys):
    assert main(["logs", str(SGLANG_LOG), "--engine", "nccl", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"findings": []}


def test_no_findings_says_so(capsys, tmp_path):
    clean = tmp_path / "clean.log"
    clean.write_text("all good\n")
    assert main(["logs", str(clean)]) == 0
    assert capsys.readouterr().out.strip() == "No known log lines found."


def test_unknown_engine_is_a_usage_error(capsys):
    assert main(["logs", str(SGLANG_LOG), "--engine", "tgi"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.strip() == (
        "servelab: error: unknown engine 'tgi' for log signatures; valid: llamacpp, sglang, vllm, ollama, nccl"
    )


def test_missing_file_is_one_line(capsys, tmp_path):
    assert main(["logs", str(tmp_path / "nope.log")]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert (
        err.count("\n") == 1
        and f"log file {tmp_path / 'nope.log'}: no such file" in err
        and "Traceback" not in err
    )


def test_follow_rejects_stdin_and_several_files(capsys):
    assert main(["logs", "-", "--follow"]) == 2
    assert "--follow takes exactly one file path" in capsys.readouterr().err


def test_follow_reports_lines_appended_later(tmp_path):
    log = tmp_path / "growing.log"
    log.write_text("starting\n")
    seen: list[str] = []
    stop = threading.Event()
    result: list = []
    signatures = load_signatures(["llamacpp"])
    worker = threading.Thread(
        target=lambda: result.append(
            follow(str(log), signatures, lambda f: seen.append(f.id), 0.01, stop.is_set)
        )
    )
    worker.start()
    with log.open("a") as stream:
        stream.write("slot context shift, n_keep = 0, n_left = 255, n_disc")  # half a line first
        stream.flush()
        time.sleep(0.05)
        stream.write("ard = 127\nslot context shift, n_keep = 0, n_left = 255, n_discard = 127\n")
    deadline = time.monotonic() + 10
    while not seen and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.05)
    stop.set()
    worker.join(10)
    assert seen == ["llamacpp.ctx.shift"]
    (finding,) = result[0]
    assert (finding.line, finding.count) == (2, 2)


def test_user_signature_file_extends_the_database(tmp_path, capsys):
    extra = tmp_path / "mine.yaml"
    extra.write_text(
        "engine: mine\n"
        "signatures:\n"
        "  - id: mine.oom\n"
        "    versions_seen: [local]\n"
        "    source: our own wrapper\n"
        "    severity: critical\n"
        "    match: 'worker {rank:int} ran out of memory'\n"
        "    meaning: 'rank {rank} died'\n"
        "    fix: restart it\n"
    )
    log = tmp_path / "run.log"
    log.write_text("ok\nworker 3 ran out of memory\n")
    assert main(["logs", str(log), "--signatures", str(extra), "--json"]) == 0
    (finding,) = json.loads(capsys.readouterr().out)["findings"]
    assert (finding["id"], finding["engine"], finding["line"], finding["meaning"]) == (
        "mine.oom",
        "mine",
        2,
        "rank 3 died",
    )


def test_a_broken_user_signature_file_names_file_and_entry(tmp_path, capsys):
    extra = tmp_path / "broken.yaml"
    extra.write_text("engine: mine\nsignatures:\n  - id: mine.bad\n    match: '(a+)+b'\n")
    assert main(["logs", str(SGLANG_LOG), "--signatures", str(extra)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert f"signature file {extra}, entry 0 (mine.bad): missing" in err


def test_a_binary_or_malformed_signature_file_is_one_line(tmp_path, capsys):
    binary = tmp_path / "blob.yaml"
    binary.write_bytes(bytes(range(256)) * 4)
    malformed = tmp_path / "malformed.yaml"
    malformed.write_text("engine: mine\nsignatures: [\n  }\n")
    for extra, says in ((binary, ": not a YAML text file"), (malformed, ": not valid YAML (")):
        assert main(["logs", str(SGLANG_LOG), "--signatures", str(extra)]) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.count("\n") == 1 and "Traceback" not in err
        assert f"signature file {extra}{says}" in err

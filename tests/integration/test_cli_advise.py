"""`servelab advise` through the CLI on catalog models: stdout, stderr and the exit code apart; bad input; the field
report's first lesson (one card with a 4-bit format above tensor parallelism over a host-staged link)."""

from __future__ import annotations

import json
import re

import pytest

from servelab.cli.app import main
from servelab.predict.stepmodel import STEP_MODEL_ENV

QWEN3_8B = [
    "advise",
    "Qwen/Qwen3-8B",
    "--gpu",
    "h100-sxm",
    "--engine",
    "sglang",
    "--users",
    "4",
    "--slo",
    "ttft_p99_ms=1000,tpot_p99_ms=50",
    "--price",
    "2",
]


def test_advise_prints_the_front_with_launch_commands_and_why_others_lost(capsys) -> None:
    assert main(QWEN3_8B) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines[0] == (
        "advise Qwen/Qwen3-8B on 1 x h100-sxm, context 1024: 4 users, SLO ttft_p99_ms<=1000, tpot_p99_ms<=50;"
        " $2/GPU-hour"
    )
    tally = re.match(
        r"27 candidates: 0 do not fit, (\d+) screened out by their bounds, 0 miss the SLO, (\d+) meet it; front of ",
        lines[1],
    )
    assert tally and int(tally[1]) + int(tally[2]) == 27, lines[1]
    assert lines[2].startswith("1. sglang awq-w4g128 kv=fp8_e4m3 tp=1 slots=4096: ")
    assert "tok/s per GPU (1 replica x 4 users, 1 GPU); p99 TTFT " in lines[2]
    assert lines[3] == (
        "   $ python -m sglang.launch_server --model-path Qwen/Qwen3-8B --host 127.0.0.1 --port 30000"
        " --quantization awq --context-length 1024 --kv-cache-dtype fp8_e4m3"
    )
    assert "why the others lost:" in lines
    assert (
        "  sglang awq-w4g128 kv=auto tp=1 slots=4096: dominated by sglang awq-w4g128 kv=fp8_e4m3 tp=1 slots=4096"
        in lines
    )
    assert lines[-1] == "  … 13 more (--all, or --json)"
    bar = err.splitlines()  # the progress bar, drawn once at its end where stderr is not a terminal
    assert len(bar) == 1 and bar[0].startswith("advise ") and " 27/27 " in bar[0]


def test_advise_json_carries_front_ranking_and_costs(capsys) -> None:
    assert main([*QWEN3_8B, "--json"]) == 0
    out, _ = capsys.readouterr()
    data = json.loads(out)
    assert (data["model"], data["gpu"], data["gpus"], data["candidates"]) == (
        "Qwen/Qwen3-8B",
        "h100-sxm",
        1,
        27,
    )
    assert data["slo"] == {"ttft_p99_ms": 1000.0, "tpot_p99_ms": 50.0}
    assert data["demand"] == {"users": 4, "rate": None}
    best = data["front"][0]
    assert best["candidate"] == "sglang awq-w4g128 kv=fp8_e4m3 tp=1 slots=4096"
    assert best["command"].startswith("python -m sglang.launch_server --model-path Qwen/Qwen3-8B")
    assert best["usd_per_million_output_tokens"] == pytest.approx(
        2 / (best["output_tok_s"] * 3600) * 1e6, rel=1e-5
    )  # tok/s rounded to 0.01
    assert len(data["ranked"]) + len(data["screened"]) == 27 and data["ranked"][0]["on_front"] is True
    assert data["missed"] == [] and data["pruned"] == []
    assert {r["dominated_by"] for r in data["ranked"] if not r["on_front"]} <= {
        f["candidate"] for f in data["front"]
    }


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--slo", "ttft_ms=500"], "servelab: error: unknown SLO 'ttft_ms=500' in --slo; use ttft_pN_ms"),
        (["--slo", "ttft_p99_ms=500", "--price", "-1"], "servelab: error: --price must be a number"),
        (["--slo", "ttft_p99_ms=500", "--users", "4", "--rate", "2"], "servelab: error: give --users"),
        (
            ["--slo", "ttft_p99_ms=500", "--power-price", "-0.1"],
            "servelab: error: --power-price must be a number",
        ),
        (
            ["--slo", "ttft_p99_ms=500", "--trace", "t.jsonl"],
            "servelab: error: --trace t.jsonl: servelab predict does not replay",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(capsys, args: list[str], says: str) -> None:
    assert main(["advise", "Qwen/Qwen3-8B", "--gpu", "h100-sxm", *args]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(says)
    assert err.count("\n") == 1


def test_field_report_one_card_with_4_bit_ranks_above_tensor_parallel_over_a_host_staged_link(capsys) -> None:
    """The field report (docs/reference/field-report.md): Qwen3.5-27B on two 48 GB RTX 4090s in a KVM guest without
    P2P; for one user, one card with AWQ and an FP8 KV cache beat TP=2 (the all-reduces staged through the host)."""
    args = [
        "advise",
        "Qwen/Qwen3.5-27B",
        "--gpu",
        "rtx4090-48g",
        "--gpus",
        "2",
        "--interconnect",
        "pcie-host-staged",
        "--users",
        "1",
        "--slo",
        "tpot_p99_ms=200",
        "--engine",
        "sglang",
        "--json",
    ]
    assert main(args) == 0
    ranked = json.loads(capsys.readouterr().out)["ranked"]
    best = ranked[0]
    assert (best["engine"], best["quant"], best["tensor_parallel"]) == ("sglang", "awq-w4g128", 1)
    assert best["kv_dtype"].startswith("fp8")
    tp2 = [i for i, r in enumerate(ranked) if r["tensor_parallel"] == 2]
    same_format = [i for i in tp2 if ranked[i]["quant"] == "awq-w4g128"]
    assert same_format and min(same_format) > max(
        i for i, r in enumerate(ranked) if r["tensor_parallel"] == 1 and r["quant"] == "awq-w4g128"
    )
    assert ranked[min(same_format)]["output_tok_s_per_gpu"] < best["output_tok_s_per_gpu"] / 2


def test_field_report_sixteen_mixed_users_take_continuous_batching_over_llamacpp_slots(
    monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """The field report's second goal: 16 users of mixed long and short requests at TTFT p99 <= 5 s on the same
    machine; llama.cpp's slots queue the long prompts (a slot per request, evictions), continuous batching carries
    them.

    Priced with the plan's figures (no step model). Under the fit shipped on 2026-12-02 (sglang at its priors, no
    sglang row on a GeForce card in the corpus; llama.cpp fitted on llama-bench rows at λ 0.01) advise ranks
    llama.cpp IQ4_XS with 16 slots first (224 tok/s per GPU, p99 TTFT 3.0 s, against sglang fp8's 138 tok/s at
    2.7 s): the field report's answer does not hold under the shipped fit, and issue 24 says so; this test keeps
    the decision logic pinned on the figures that do not move with each re-fit."""
    monkeypatch.setenv(STEP_MODEL_ENV, "none")
    args = [
        "advise",
        "Qwen/Qwen3.5-27B",
        "--gpu",
        "rtx4090-48g",
        "--gpus",
        "2",
        "--interconnect",
        "pcie-host-staged",
        "--users",
        "16",
        "--workload",
        "mixed",
        "--slo",
        "ttft_p99_ms=5000",
        "--engine",
        "sglang",
        "--engine",
        "llamacpp",
        "--json",
    ]
    assert main(args) == 0
    data = json.loads(capsys.readouterr().out)
    front = [r for r in data["ranked"] if r["on_front"]]
    assert data["ranked"][0]["engine"] == "sglang" and front and {r["engine"] for r in front} == {"sglang"}
    # llama.cpp's slots lose with a reason: they miss the SLO, or (priced by the corpus step model, whose
    # prompt rate lets some meet 5 s) an sglang configuration delivers more at a lower tail
    slots = [r for r in data["ranked"] + data["missed"] if r["engine"] == "llamacpp"]
    assert slots
    for r in slots:
        missed = (r["lost"] or "").startswith("misses the SLO from ")
        assert missed or (r["dominated_by"] or "").startswith("sglang "), r


def test_rate_demand_and_an_engine_variant_read_by_its_own_reader(capsys) -> None:
    args = [
        "advise",
        "llama-3.2-1b",
        "--gpu",
        "rtx4090",
        "--engine",
        "llamacpp",
        "--rate",
        "20",
        "--variant",
        "llamacpp --kv-unified",
        "--slo",
        "ttft_p99_ms=500",
        "--json",
    ]
    assert main(args) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["demand"] == {"users": None, "rate": 20.0}
    unified = [r for r in data["ranked"] + data["missed"] if r["engine_words"] == ["--kv-unified"]]
    assert unified and all("--kv-unified" in r["command"].split() for r in unified)
    for r in data["ranked"]:  # the short workload's 128 output tokens at 20 req/s, over the GPUs used
        assert r["output_tok_s"] == pytest.approx(20 * 128, abs=0.01)
        assert r["output_tok_s_per_gpu"] == pytest.approx(20 * 128 / r["gpus_used"], abs=0.01)


def test_advise_weighs_an_engine_it_never_names(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """The toy engine (tests/toy_engine), registered by one line, is planned, predicted and ranked, its own knob
    (--step-tokens) read by its own reader as a variant: advise names no engine."""
    from servelab.engines import registry
    from tests.toy_engine.engine import ENGINE as TOY

    monkeypatch.setattr(registry, "REGISTRY", (TOY, *registry.REGISTRY))
    args = [
        "advise",
        "Qwen/Qwen3-8B",
        "--gpu",
        "h100-sxm",
        "--engine",
        "toy",
        "--users",
        "2",
        "--slo",
        "ttft_p99_ms=60000",
        "--variant",
        "toy --step-tokens 64",
        "--json",
        "--no-calibration",
    ]
    assert main(args) == 0
    data = json.loads(capsys.readouterr().out)
    ranked = data["ranked"]
    assert ranked and {r["engine"] for r in ranked} == {"toy"}
    own = [r for r in ranked if r["engine_words"] == ["--step-tokens", "64"]]
    assert own and all("--step-tokens 64" in r["command"] for r in own)
    assert all("--step-tokens" not in r["command"] for r in ranked if not r["engine_words"])

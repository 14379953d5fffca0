"""`servelab advise` through the CLI on catalog models: stdout, stderr and the exit code apart; bad input; the field
report's first lesson (one card with a 4-bit format above tensor parallelism over a host-staged link)."""

from __future__ import annotations

import json
import re

import pytest

from servelab.cli.app import main

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
    # the shipped fit prices it, so the SLOs are judged at its bands' upper edge too, beside the prediction
    assert lines[3].startswith("   safe at this load (every SLO met at the bands' upper edge); safe to ")
    assert lines[4] == (
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


def test_field_report_sixteen_mixed_users_put_continuous_batching_first(
    capsys,
) -> None:
    """The field report's second goal: 16 users of mixed long and short requests at TTFT p99 <= 5 s on the same
    machine, under the step model fit that ships. The report found continuous batching (sglang) over llama.cpp's
    slots. The shipped fit (2,025 corpus rows) prices sglang at its priors and llama.cpp's serving figures with
    every engine's serving bands (the corpus has no llama.cpp serving row); on the predictions alone llama.cpp
    IQ4_XS with 16 slots serves more per GPU (218 against 138 tok/s), but inside both goodput bands, so the two
    tie and the tie is ordered by the goodput each can be counted on (the bands' lower edge): sglang's, first,
    as the report found; llama.cpp's layouts are on the front within its band, and none beats an sglang one
    beyond the error. A refit that turns this over fails here, on purpose. A band need not hold its own point:
    where every left-out ratio of a regime lies above 1 (sglang's TTFT here, under-predicted), it lies above."""
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
    front, ranked = data["front"], data["ranked"]
    assert front and all(m["effective_figures"] == "corpus" for m in front)
    batching = [m for m in front if m["engine"] == "sglang"]
    assert batching, [m["candidate"] for m in front]
    best = batching[0]
    assert best is front[0], [m["candidate"] for m in front]  # continuous batching first, as the report found
    tied = [m for m in front[1:] if m["engine"] == "llamacpp"]
    assert tied and all(
        m["within_band_of"] == best["candidate"] for m in tied
    )  # the reason: inside its bands
    for r in ranked:  # no sglang configuration lost to llama.cpp's slots beyond the error bands
        if r["engine"] == "sglang" and r["dominated_by"] is not None:
            assert r["dominated_by"].startswith("sglang "), r
    # each figure carries its band, and the SLO judged at the bands' upper edge is reported beside the point's
    assert set(best["bands"]) >= {"output_tok_s_per_gpu", "ttft_p99_ms"}
    low, high = best["bands"]["ttft_p99_ms"]
    assert 0 < low < high
    assert best["safe_at_load"] is (high <= 5000) and (best["misses_at_band_edge"] == []) is (high <= 5000)
    for m in front:
        safe = m["safe_capacity_per_replica"]
        assert safe is None or safe <= m["capacity_per_replica"]


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

"""`servelab plan` end to end through the CLI: the issue's Done-means, the JSON interface, bad input."""

from __future__ import annotations

import json
import shlex
from itertools import pairwise
from pathlib import Path

import pytest
import yaml

from servelab.cli.app import main
from servelab.plan.io import load_plan
from servelab.verify.asked import from_plan

BRIEF = [
    "plan",
    "Qwen/Qwen3.5-27B",
    "--gpu",
    "rtx4090-48g",
    "--engine",
    "sglang",
    "--quant",
    "awq",
    "--context",
    "262144",
    "--kv-dtype",
    "fp8_e5m2",
]
INTERFACE_MEMORY = {"weights", "kv_cache", "recurrent_state", "activations", "runtime", "total", "capacity"}


def test_brief_plan_prints_the_component_table_and_ceilings(capsys) -> None:
    assert main(BRIEF) == 0
    out, err = capsys.readouterr()
    assert err == ""
    for text in (
        "weights (text)",
        "KV cache",
        "recurrent state",
        "activations",
        "runtime",
        "total",
        "decode ceiling",
        "prefill ceiling",
        "fits",
        "--kv-cache-dtype fp8_e5m2",
    ):
        assert text in out


def test_brief_plan_json_has_the_interface_fields(capsys) -> None:
    assert main([*BRIEF, "--json"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    doc = json.loads(out)
    assert (doc["model"], doc["gpu"]) == ("Qwen/Qwen3.5-27B", "rtx4090-48g")
    plan = doc["plans"][0]
    assert (plan["engine"], plan["context"], plan["kv_dtype"], plan["tensor_parallel"]) == (
        "sglang",
        262144,
        "fp8_e5m2",
        1,
    )
    assert plan["quant"].startswith("awq") and plan["fits"] is True
    assert set(plan["memory_bytes"]) >= INTERFACE_MEMORY
    memory = plan["memory_bytes"]
    assert memory["total"] <= memory["capacity"] == 49140 * 1024**2
    # the KV pool holds at least the whole context at 32 KiB per token (fp8, 16 full-attention layers)
    assert memory["kv_cache"] >= 262144 * 32 * 1024
    ceiling = plan["decode_ceiling_tok_s"]
    assert ceiling["short"] > ceiling["full_context"] > 0
    assert plan["prefill_ceiling_tok_s"] > 0 and isinstance(plan["warnings"], list)
    assert plan["details"]["max_req_len"] == 262143
    assert plan["prefill_short_tok_s"] > plan["prefill_ceiling_tok_s"]  # attention over 262K tokens costs
    short = plan["decode_batch_tok_s"]
    assert {p["context"] for p in short} == {1024}
    assert {p["context"] for p in plan["decode_batch_full_context_tok_s"]} == {262144}
    assert [p["batch"] for p in short][:3] == [1, 2, 4]
    assert all(a["aggregate_tok_s"] < b["aggregate_tok_s"] for a, b in pairwise(short))


def test_without_engine_and_quant_it_compares_candidates(capsys) -> None:
    assert main(["plan", "Qwen/Qwen3.5-27B", "--gpu", "rtx4090-48g", "--json"]) == 0
    plans = json.loads(capsys.readouterr().out)["plans"]
    pairs = {(p["engine"], p["quant"]) for p in plans}
    assert {"sglang", "vllm", "llamacpp"} == {e for e, _ in pairs}
    assert ("llamacpp", "Q4_K_M") in pairs and any(q.startswith("awq") for _, q in pairs)
    fits = [p["fits"] for p in plans]
    assert fits == sorted(fits, reverse=True)  # fitting plans first
    assert not any(
        p["quant"] == "bf16" and p["fits"] for p in plans
    )  # 54 GB of bf16 weights cannot fit 48 GB


def test_comparison_table_names_the_best_plan(capsys) -> None:
    assert main(["plan", "Qwen/Qwen3-8B", "--gpu", "rtx4090", "--context", "32768"]) == 0
    out = capsys.readouterr().out
    assert "best:" in out and "Q4_K_M" in out


def test_emit_cmd_prints_one_quoted_command(capsys) -> None:
    assert (
        main([*BRIEF, "--emit", "cmd", "--", "--mem-fraction-static", "0.9", "--max-total-tokens", "262144"])
        == 0
    )
    line = capsys.readouterr().out.strip()
    argv = shlex.split(line)
    assert argv[:3] == ["python", "-m", "sglang.launch_server"]
    assert "--mem-fraction-static" in argv and "--max-total-tokens" in argv and "127.0.0.1" in argv


def test_emit_compose_is_yaml_with_a_health_check(capsys) -> None:
    assert (
        main(
            [
                "plan",
                "Qwen/Qwen3-8B",
                "--engine",
                "llamacpp",
                "--quant",
                "Q4_K_M",
                "--context",
                "8192",
                "--emit",
                "compose",
            ]
        )
        == 0
    )
    doc = yaml.safe_load(capsys.readouterr().out)
    service = doc["services"]["llamacpp"]
    assert service["ports"] == ["127.0.0.1:8080:8080"] and "healthcheck" in service


def test_json_with_emit_stays_json_and_carries_the_recipe(capsys) -> None:
    assert main([*BRIEF, "--emit", "cmd", "--json"]) == 0
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert err == "" and doc["plans"][0]["engine"] == "sglang"
    assert doc["recipe"]["format"] == "cmd" and shlex.split(doc["recipe"]["text"])[:3] == [
        "python",
        "-m",
        "sglang.launch_server",
    ]


def test_emit_when_nothing_fits_says_so_on_stderr(capsys) -> None:
    assert (
        main(
            [
                "plan",
                "Qwen/Qwen3.5-27B",
                "--gpu",
                "rtx4090",
                "--engine",
                "sglang",
                "--quant",
                "bf16",
                "--emit",
                "cmd",
            ]
        )
        == 0
    )
    out, err = capsys.readouterr()
    assert shlex.split(out)[:3] == ["python", "-m", "sglang.launch_server"]
    # one launch as asked (--engine and --quant): its own verdict, no search ("nothing fits" is a comparison's)
    assert err.startswith("warning: sglang bf16 does not fit as asked; this recipe is the launch as asked")


def test_saved_plan_reads_back_for_verify_and_report(tmp_path: Path, capsys) -> None:
    path = tmp_path / "plan.json"
    assert (
        main(
            [
                "plan",
                "Qwen/Qwen3-8B",
                "--engine",
                "llamacpp",
                "--quant",
                "Q4_K_M",
                "--context",
                "16384",
                "--kv-dtype",
                "q8_0",
                "--save",
                str(path),
            ]
        )
        == 0
    )
    assert "plan saved" in capsys.readouterr().err
    doc = load_plan(path)
    assert doc.plans[0].engine == "llamacpp"
    asked = from_plan(path)  # the verify command's reader understands our file
    assert asked.engine == "llamacpp"


def test_tensor_parallel_without_p2p_warns(capsys) -> None:
    assert main([*BRIEF, "--gpus", "2", "--interconnect", "pcie-host-staged", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)["plans"][0]
    assert plan["tensor_parallel"] == 2 and plan["parallel_cost"]["interconnect"] == "pcie-host-staged"
    assert plan["decode_ceiling_tok_s"]["full_context"] < plan["single_gpu_decode_tok_s"]


def test_overrides_make_a_custom_gpu(capsys) -> None:
    assert (
        main(
            [
                "plan",
                "Qwen/Qwen3-8B",
                "--vram",
                "12",
                "--bandwidth",
                "360",
                "--engine",
                "llamacpp",
                "--quant",
                "Q4_K_M",
                "--context",
                "8192",
                "--json",
            ]
        )
        == 0
    )
    plan = json.loads(capsys.readouterr().out)["plans"][0]
    assert plan["memory_bytes"]["capacity"] == 12 * 1024**3


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--", "-ub", "256"], "the words after -- (-ub 256) are one engine's flags: name it with --engine"),
        (["--engine", "vllm", "--", "--max-model-len", "8192"], "give servelab's --context instead"),
        (["--engine", "vllm", "--", "--max-num-seq", "8"], "'--max-num-seq' after --: not a vLLM flag"),
        (
            ["--engine", "vllm", "--max-num-seqs", "8"],
            "No such option: --max-num-seqs",
        ),  # engine flags go after --
    ],
)
def test_engine_flags_go_after_dashes_for_one_named_engine(args: list[str], needle: str, capsys) -> None:
    test_bad_input_is_one_line_and_exit_2(["plan", "Qwen/Qwen3-8B", *args], needle, capsys)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["plan", "Nobody/Nothing-1B"], "unknown model"),
        (["plan", "Qwen/Qwen3-8B", "--gpu", "rtx9999"], "rtx4090-48g"),
        (
            ["plan", "Qwen/Qwen3-8B", "--context", "0"],
            "--context must be a whole number from 1 to 100,000,000 tokens, got 0",
        ),
        (["plan", "Qwen/Qwen3-8B", "--context", "-5"], "--context must be a whole number from 1 to"),
        (
            ["plan", "Qwen/Qwen3-8B", "--parallel", "100000000"],
            "--parallel must be a whole number from 1 to 65,536",
        ),
        (["plan", "Qwen/Qwen3-8B", "--quant", "awq-w5g128"], "valid"),
        (["plan", "Qwen/Qwen3-8B", "--engine", "llamacpp", "--quant", "awq"], "cannot load"),
        (["plan", "Qwen/Qwen3-8B", "--engine", "tgi"], "llama.cpp, sglang, vLLM, all"),
        (["plan", "Qwen/Qwen3-8B", "--emit", "helm"], "cmd, compose"),
        (["plan", "Qwen/Qwen3-8B", "--gpus", "2", "--interconnect", "carrier-pigeon"], "pcie-host-staged"),
        (
            ["plan", "Qwen/Qwen3-8B", "--engine", "sglang", "--quant", "bf16", "--kv-dtype", "int3"],
            "fp8_e5m2",
        ),
        (
            [
                "plan",
                "Qwen/Qwen3-8B",
                "--engine",
                "vllm",
                "--quant",
                "awq",
                "--",
                "--gpu-memory-utilization",
                "0",
            ],
            "(0, 1]",
        ),
        (
            [
                "plan",
                "Qwen/Qwen3-8B",
                "--engine",
                "sglang",
                "--quant",
                "awq",
                "--",
                "--max-total-tokens",
                "0",
            ],
            "at least 1",
        ),
        (
            [
                "plan",
                "Qwen/Qwen3.5-27B",
                "--engine",
                "sglang",
                "--quant",
                "awq",
                "--",
                "--max-mamba-cache-size",
                "-1",
            ],
            "at least 1",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], needle: str, capsys) -> None:
    assert main(args) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert needle in err and err.count("\n") == 1 and "Traceback" not in err


def test_a_gguf_file_is_planned_with_its_exact_bytes_on_llamacpp_only(tmp_path: Path, capsys) -> None:
    from servelab.modelmake import make_model

    made = make_model("hybrid", tmp_path / "tiny.gguf")
    assert main(["plan", str(made.path), "--gpu", "l4", "--context", "4096", "--json"]) == 0
    plans = json.loads(capsys.readouterr().out)["plans"]
    assert [p["engine"] for p in plans] == ["llamacpp"]
    plan = plans[0]
    assert plan["fits"] and plan["details"]["n_ctx_per_slot"] == 4096
    assert plan["command"][plan["command"].index("-m") + 1] == str(made.path)
    assert main(["plan", str(made.path), "--quant", "Q4_K_M"]) == 2
    assert "read from a file" in capsys.readouterr().err


def test_a_plan_under_one_gib_is_shown_in_mib(tmp_path: Path, capsys, monkeypatch) -> None:
    from servelab.modelmake import make_model

    monkeypatch.setenv("COLUMNS", "200")
    made = make_model("hybrid", tmp_path / "tiny.gguf")
    assert main(["plan", str(made.path), "--gpu", "l4", "--context", "4096"]) == 0
    out = capsys.readouterr().out
    weights = next(line for line in out.splitlines() if "weights (text)" in line)
    assert "MiB" in out and float(weights.split("│")[2]) == pytest.approx(made.file_bytes / 2**20, rel=0.2)
    assert "1 concurrent sequence;" in out


def test_a_relative_model_path_becomes_absolute_in_the_recipe(tmp_path: Path, capsys, monkeypatch) -> None:
    from servelab.modelmake import make_model

    make_model("dense", tmp_path / "tiny.gguf")
    monkeypatch.chdir(tmp_path)
    assert main(["plan", "tiny.gguf", "--emit", "cmd"]) == 0
    argv = shlex.split(capsys.readouterr().out)
    assert argv[argv.index("-m") + 1] == str(tmp_path / "tiny.gguf")
    assert main(["plan", "tiny.gguf", "--emit", "compose"]) == 0
    service = yaml.safe_load(capsys.readouterr().out)["services"]["llamacpp"]
    assert "/models/tiny.gguf" in service["entrypoint"] and f"{tmp_path}:/models:ro" in service["volumes"]


def test_apple_gpus_plan_llamacpp_only(capsys) -> None:
    assert main(["plan", "Qwen/Qwen3-8B", "--gpu", "m4-max", "--context", "32768", "--json"]) == 0
    assert {p["engine"] for p in json.loads(capsys.readouterr().out)["plans"]} == {"llamacpp"}
    assert main(["plan", "Qwen/Qwen3-8B", "--gpu", "m4-max", "--engine", "sglang", "--quant", "awq"]) == 2
    assert "CUDA or ROCm" in capsys.readouterr().err


def test_parallel_sets_the_concurrency_flags(capsys) -> None:
    assert (
        main(
            [
                "plan",
                "Qwen/Qwen3-8B",
                "--gpu",
                "rtx4090",
                "--engine",
                "llamacpp",
                "--quant",
                "Q4_K_M",
                "--context",
                "16384",
                "--parallel",
                "4",
                "--json",
            ]
        )
        == 0
    )
    plan = json.loads(capsys.readouterr().out)["plans"][0]
    # each of the 4 slots gets the whole 16384: -c is 4 x 16384 without a unified cache
    assert plan["details"]["n_ctx"] == 65536 and plan["details"]["n_ctx_per_slot"] == 16384
    assert plan["slots"] == 4
    assert (
        main(
            [
                "plan",
                "Qwen/Qwen3-8B",
                "--gpu",
                "rtx4090",
                "--engine",
                "vllm",
                "--quant",
                "awq",
                "--context",
                "16384",
                "--parallel",
                "8",
                "--emit",
                "cmd",
            ]
        )
        == 0
    )
    assert "--max-num-seqs 8" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("{not json", "not JSON"),
        ('{"model": "x"}', "no plan entries"),
        ('{"plans": [{"engine": "sglang"}]}', r"plans\[0\] lacks quant"),
        ("[1, 2]", "not a JSON object"),
    ],
)
def test_load_plan_rejects_what_is_not_a_plan(tmp_path: Path, content: str, needle: str) -> None:
    from servelab.errors import ConfigError

    path = tmp_path / "plan.json"
    path.write_text(content)
    with pytest.raises(ConfigError, match=needle):
        load_plan(path)
    with pytest.raises(ConfigError, match=r"missing\.json: no such file"):
        load_plan(tmp_path / "missing.json")


def test_engine_flags_reach_the_recipe(capsys) -> None:
    # brief step 2's working flags, with the state pool pinned
    assert (
        main(
            [
                *BRIEF,
                "--json",
                "--",
                "--mem-fraction-static",
                "0.9",
                "--max-total-tokens",
                "262144",
                "--max-mamba-cache-size",
                "8",
            ]
        )
        == 0
    )
    plan = json.loads(capsys.readouterr().out)["plans"][0]
    assert plan["details"]["mamba_cache_size"] == 8 and plan["details"]["max_total_tokens"] == 262144
    assert "--max-mamba-cache-size" in plan["command"] and "--mem-fraction-static" in plan["command"]
    assert (
        main(
            [
                "plan",
                "Qwen/Qwen3.5-27B",
                "--gpu",
                "rtx4090",
                "--engine",
                "llamacpp",
                "--quant",
                "Q4_K_M",
                "--context",
                "131072",
                "--parallel",
                "4",
                "--json",
                "--",
                "--kv-unified",
                "-ngl",
                "40",
            ]
        )
        == 0
    )
    plan = json.loads(capsys.readouterr().out)["plans"][0]
    assert plan["details"]["n_ctx"] == 131072 and plan["details"]["n_ctx_per_slot"] == 131072
    assert plan["memory_bytes"]["host_bytes"] > 0 and "--kv-unified" in plan["command"]
    # current builds count the output layer in -ngl and offload it first: 39 repeating layers on the card
    assert any("-ngl 40 keeps 25 of 64 layers in host RAM" in w for w in plan["warnings"])


def test_a_context_beyond_the_model_does_not_fit_anywhere(capsys) -> None:
    # sglang and vLLM refuse to start (env overrides needed), llama.cpp caps the slot at n_ctx_train
    assert main(["plan", "Qwen/Qwen3-8B", "--gpu", "h200", "--context", "65536", "--json"]) == 0
    plans = json.loads(capsys.readouterr().out)["plans"]
    assert plans and not any(p["fits"] for p in plans)
    warnings = " ".join(w for p in plans for w in p["warnings"])
    for needle in (
        "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN",
        "VLLM_ALLOW_LONG_MAX_MODEL_LEN",
        "training context",
    ):
        assert needle in warnings


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--gpus", "100000"], "--gpus must be a whole number from 1 to 64"),
        (["--engine", "llamacpp", "--", "-ngl", "-5"], "-ngl must be -1"),
        (["--gpu", ""], "unknown GPU ''"),
    ],
)
def test_out_of_range_gpu_settings_are_usage_errors(capsys, args, message) -> None:
    assert main(["plan", "Qwen/Qwen3-8B", *args]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and message in captured.err and len(captured.err.strip().splitlines()) == 1


def test_ngl_minus_one_offloads_every_layer_like_llama_cpp(capsys) -> None:
    base = ["plan", "Qwen/Qwen3-8B", "--engine", "llamacpp", "--quant", "Q4_K_M", "--json"]
    assert main([*base, "--", "-ngl", "-1"]) == 0
    all_layers = json.loads(capsys.readouterr().out)["plans"][0]["memory_bytes"]
    assert main(base) == 0
    default = json.loads(capsys.readouterr().out)["plans"][0]["memory_bytes"]
    assert all_layers["weights"] == default["weights"] > 4 * 2**30


def test_plan_speculative_mtp_prices_the_mtp_head_and_emits_the_config(capsys) -> None:
    args = ["plan", "Qwen/Qwen3.5-27B", "--gpu", "rtx5090", "--engine", "vllm", "--quant", "awq"]
    code = main([*args, "--context", "32768", "--kv-dtype", "fp8", "--speculative", "mtp:3", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    plan = json.loads(out)["plans"][0]
    assert plan["memory_bytes"]["weights_mtp"] > 0 and plan["details"]["padding_layers"] == 3
    assert plan["command"][-2:] == ["--speculative-config", '{"method":"mtp","num_speculative_tokens":3}']


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("mtp", "--speculative 'mtp': give METHOD:N"),
        ("medusa:3", "speculative method 'medusa' is not known"),
        ("draft:4", "speculative method draft needs a draft model"),
    ],
)
def test_plan_speculative_bad_value_is_one_line(capsys, value: str, message: str) -> None:
    code = main(["plan", "Qwen/Qwen3.5-27B", "--gpu", "rtx5090", "--engine", "vllm", "--speculative", value])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err

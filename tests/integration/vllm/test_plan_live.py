"""`servelab plan --gpu cpu --engine vllm` against real vLLM allocations: the plan's block size, blocks, KV tokens
and maximum concurrency (and for hybrids the state padding) are the figures the live server logs and exposes in
/metrics cache_config_info (engines/vllm/cpu_planner.py, memory.py; docs/reference/vllm-cpu.md §8, §11)."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path

import pytest

from servelab.cli.app import main
from servelab.engines.prometheus import first_labels
from servelab.modelmake.hf_make import make_hf_model
from tests.integration.vllm.conftest import LIVE_KV_GIB, start_test_vllm

# `plan --gpu cpu` reads this machine's bandwidth: measured once a run (conftest.py), not once a plan
pytestmark = pytest.mark.usefixtures("measured_host")

CONTEXT = 2048
KV_LINE = re.compile(
    r"CPU KV cache size: ([\d,]+) tokens, Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x"
)
BLOCK_LINE = re.compile(r"Setting attention block size to (\d+) tokens")
PADDING_LINE = re.compile(r"Padding mamba page size by ([\d.]+)%")


def _plan(capsys, model_dir: Path) -> dict:
    argv = [
        "plan",
        str(model_dir),
        "--gpu",
        "cpu",
        "--engine",
        "vllm",
        "--context",
        str(CONTEXT),
        "--json",
        "--",
        f"VLLM_CPU_KVCACHE_SPACE={LIVE_KV_GIB}",
    ]
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)["plans"][0]["details"]


def _engine_figures(url: str, log: str) -> dict:
    """What the server says it allocated: its KV cache line and cache_config_info."""
    tokens, length, concurrency = KV_LINE.search(log).groups()
    with urllib.request.urlopen(f"{url}/metrics", timeout=30) as answer:
        info = first_labels(answer.read().decode(), "vllm:cache_config_info")
    assert int(length.replace(",", "")) == CONTEXT
    return {
        "kv_tokens": int(tokens.replace(",", "")),
        "max_concurrency": concurrency,
        "num_blocks": int(info["num_gpu_blocks"]),
        "block_size": int(info["block_size"]),
    }


def _planned(details: dict) -> dict:
    keys = ("kv_tokens", "num_blocks", "block_size")
    return {**{k: details[k] for k in keys}, "max_concurrency": f"{details['max_concurrency']:.2f}"}


def test_the_dense_plan_is_the_shared_servers_allocation(vllm_live, capsys):
    args = list(vllm_live.args)
    assert args[args.index("--max-model-len") + 1] == str(CONTEXT)
    planned = _plan(capsys, vllm_live.model_dir)
    engine = _engine_figures(vllm_live.url, vllm_live.log_path.read_text())
    assert (
        _planned(planned)
        == engine
        == {"kv_tokens": 524_288, "max_concurrency": "256.00", "num_blocks": 4096, "block_size": 128}
    )
    assert "Setting attention block size" not in vllm_live.log_path.read_text()  # not a hybrid: the default


@pytest.mark.parametrize("kind", ["qwen3-next", "granite-hybrid"])
def test_a_hybrid_plan_is_its_servers_allocation(vllm_program, vllm_cache, tmp_path, capsys, kind):
    """One eager server per hybrid, stopped at the end: block size, padding, blocks, tokens, concurrency."""
    model_dir = make_hf_model(kind, tmp_path / kind).path
    planned = _plan(capsys, model_dir)
    args = ("--max-model-len", str(CONTEXT), "--enforce-eager")
    server = start_test_vllm(vllm_program, model_dir, tmp_path, *args, cache_dir=vllm_cache)
    try:
        log = server.log_path.read_text()
        engine = _engine_figures(server.url, log)
    finally:
        server.stop()
    assert _planned(planned) == engine
    assert int(BLOCK_LINE.search(log).group(1)) == planned["block_size"] > 128  # raised for the state
    assert PADDING_LINE.search(log).group(1) == f"{planned['mamba_padding_pct']:.2f}"
    assert "Mamba cache mode is set to 'align'" in log  # prefix caching on: the state blocks the plan counts

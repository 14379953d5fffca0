"""The demo's model pair (one Llama as a GGUF and as a Hugging Face folder) and its CPU split."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from servelab.demo import parse_engines
from servelab.demo_pair import compare_weights, hf_name, make_pair, pair_shapes
from servelab.errors import ConfigError
from servelab.hardware.pinning import cpu_split, on_cpus
from servelab.modelmake import make_model


def test_the_gguf_and_the_folder_hold_the_same_weights(tmp_path: Path) -> None:
    pair = make_pair(tmp_path, 4096)
    assert pair.params == 5_245_184 and pair.gguf.name == "llama.gguf" and (pair.hf / "config.json").is_file()
    assert pair.same_weights.startswith("the same weights: all 39 tensors equal to within bf16 rounding")


def test_another_seed_is_told_apart(tmp_path: Path) -> None:
    gguf_shape, _ = pair_shapes(4096)
    _, other = pair_shapes(4096, seed=1)
    gguf = make_model("dense", tmp_path / "a.gguf", gguf_shape)
    hf = make_model("llama", tmp_path / "b", other, fmt="hf")
    assert compare_weights(gguf.path, hf.path).startswith("the weights differ: up to")


def test_gguf_tensor_names_map_to_the_checkpoints() -> None:
    assert hf_name("blk.3.attn_q.weight") == "model.layers.3.self_attn.q_proj.weight"
    assert hf_name("blk.0.ffn_norm.weight") == "model.layers.0.post_attention_layernorm.weight"
    assert (
        hf_name("token_embd.weight") == "model.embed_tokens.weight"
        and hf_name("output.weight") == "lm_head.weight"
    )
    assert hf_name("output_norm.weight") == "model.norm.weight"


def test_engines_are_named_in_any_spelling_and_others_refused() -> None:
    assert parse_engines("llama.cpp,vllm") == ("llamacpp", "vllm") and parse_engines(" vllm ") == ("vllm",)
    assert parse_engines("llamacpp,llama.cpp") == ("llamacpp",)
    with pytest.raises(ConfigError, match="not sglang"):
        parse_engines("sglang")
    with pytest.raises(ConfigError, match="one or both"):
        parse_engines(",")


def test_server_and_client_get_different_cpus_and_the_mask_comes_back() -> None:
    allowed = os.sched_getaffinity(0)
    split = cpu_split()
    if len(allowed) < 2:
        assert split is None
        return
    assert split is not None and split.server | split.client == allowed and not split.server & split.client
    with on_cpus(split.client):
        assert os.sched_getaffinity(0) == split.client
    assert os.sched_getaffinity(0) == allowed

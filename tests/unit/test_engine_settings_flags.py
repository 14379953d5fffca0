"""The engine flags predict and plan take after `--` for eager mode, chunked prefill, expert parallelism and
speculative decoding: each engine's reader makes its Settings, whose __post_init__ checks them (one line naming the
flag), and its `speculative_words` says what they ask in servelab's terms."""

from __future__ import annotations

import pytest

from servelab.engines.llamacpp import cmdline as llamacpp
from servelab.engines.llamacpp.settings import LlamaCppSettings
from servelab.engines.llamacpp.settings import speculative_words as llamacpp_words
from servelab.engines.sglang import cmdline as sglang
from servelab.engines.sglang.settings import SglangSettings
from servelab.engines.sglang.settings import speculative_words as sglang_words
from servelab.engines.vllm import cmdline as vllm
from servelab.engines.vllm.settings import VllmSettings
from servelab.engines.vllm.settings import speculative_words as vllm_words
from servelab.errors import ConfigError
from servelab.sizing.typed import SpeculativeWords


def test_vllm_reads_eager_expert_parallel_and_its_speculative_config() -> None:
    config = '{"method": "eagle3", "num_speculative_tokens": 4, "model": "org/eagle3-head"}'
    got = vllm.settings(["--enforce-eager", "-ep", "--speculative-config", config])
    assert got.enforce_eager and got.enable_expert_parallel
    assert vllm_words(got) == SpeculativeWords("eagle", 4, "org/eagle3-head")
    assert vllm_words(VllmSettings()) is None
    mtp = VllmSettings(speculative_config='{"method": "deepseek_mtp", "num_speculative_tokens": 1}')
    assert vllm_words(mtp) == SpeculativeWords("mtp", 1)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"enforce_eager": "yes"}, "--enforce-eager is a switch, got 'yes'"),
        ({"enable_expert_parallel": 1}, "--enable-expert-parallel is a switch, got 1"),
        ({"speculative_config": "{method"}, "vLLM --speculative-config is not JSON"),
        ({"speculative_config": "[]"}, "vLLM --speculative-config must be a JSON object"),
        ({"speculative_config": '{"method": "medusa", "num_speculative_tokens": 2}'}, "method 'medusa'"),
        ({"speculative_config": '{"method": "ngram"}'}, "num_speculative_tokens must be 1 to 16, got None"),
        ({"speculative_config": '{"method": "ngram", "num_speculative_tokens": 17}'}, "got 17"),
        (
            {"speculative_config": '{"method": "eagle", "num_speculative_tokens": 2}'},
            "needs model: the draft",
        ),
    ],
)
def test_vllm_settings_refuse_in_one_line_naming_the_flag(kwargs: dict, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        VllmSettings(**kwargs)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_sglang_reads_chunked_prefill_expert_parallel_graphs_and_its_speculative_flags() -> None:
    words = [
        "--chunked-prefill-size",
        "512",
        "--ep-size",
        "4",
        "--disable-cuda-graph",
        "--speculative-algorithm",
        "EAGLE",
        "--speculative-draft-model-path",
        "org/eagle-head",
        "--speculative-num-steps",
        "3",
        "--speculative-eagle-topk",
        "1",
        "--speculative-num-draft-tokens",
        "4",
    ]
    got = sglang.settings(words)
    assert (got.chunked_prefill_size, got.ep_size, got.disable_cuda_graph) == (512, 4, True)
    assert sglang_words(got) == SpeculativeWords("eagle", 3, "org/eagle-head")
    # the words written back as asked, not servelab's own chain
    assert sglang.own_speculative_flags(got) == words[5:]
    nextn = SglangSettings(speculative_algorithm="NEXTN", speculative_num_draft_tokens=3)
    assert sglang_words(nextn) == SpeculativeWords("mtp", 2)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"chunked_prefill_size": -1}, "sglang --chunked-prefill-size -1: servelab prices a chunk"),
        ({"chunked_prefill_size": 0}, "--chunked-prefill-size"),
        ({"ep_size": 0}, "--ep-size"),
        ({"disable_cuda_graph": "on"}, "--disable-cuda-graph is a switch"),
        ({"speculative_num_steps": 3}, "--speculative-* flags need --speculative-algorithm"),
        ({"speculative_algorithm": "MEDUSA", "speculative_num_steps": 2}, "--speculative-algorithm 'MEDUSA'"),
        ({"speculative_algorithm": "NEXTN"}, "give --speculative-num-steps N"),
        (
            {"speculative_algorithm": "EAGLE", "speculative_num_steps": 2},
            "needs --speculative-draft-model-path",
        ),
        ({"speculative_algorithm": "NGRAM", "speculative_num_steps": 17}, "--speculative-num-steps"),
    ],
)
def test_sglang_settings_refuse_in_one_line_naming_the_flag(kwargs: dict, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        SglangSettings(**kwargs)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_llamacpp_reads_its_draft_and_tokens_per_step() -> None:
    got = llamacpp.settings(["-md", "draft.gguf", "--spec-draft-n-max", "6"])
    assert llamacpp_words(got) == SpeculativeWords("draft", 6, "draft.gguf")
    assert llamacpp_words(LlamaCppSettings(model_draft="d.gguf")) == SpeculativeWords("draft", 16, "d.gguf")
    assert llamacpp_words(LlamaCppSettings()) is None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"draft_max": 4}, "llama.cpp --spec-draft-n-max drafts with a draft model: give -md"),
        ({"model_draft": "d.gguf", "draft_max": 0}, "--spec-draft-n-max"),
        ({"model_draft": "d.gguf", "draft_max": 17}, "--spec-draft-n-max"),
    ],
)
def test_llamacpp_settings_refuse_in_one_line_naming_the_flag(kwargs: dict, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        LlamaCppSettings(**kwargs)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_a_launch_read_for_plan_leaves_its_draft_out_as_its_note_says() -> None:
    launch = vllm.parse(
        ["vllm", "serve", "m", "--speculative-config", '{"method": "mtp"}', "--enforce-eager"]
    )
    planned = vllm.plan_settings(launch)
    assert planned.engine.speculative_config is None and planned.engine.enforce_eager
    assert any("--speculative-config is not planned" in n for n in planned.notes)

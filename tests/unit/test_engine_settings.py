"""Each engine's own Settings: read from the words after `servelab plan … --` by its command-line reader, checked
where they are made (one line naming the flag), listed for the CLI reference."""

from __future__ import annotations

import pytest

from servelab.engines.llamacpp import cmdline as llamacpp
from servelab.engines.llamacpp.settings import LlamaCppSettings
from servelab.engines.sglang import cmdline as sglang
from servelab.engines.sglang.settings import SglangSettings
from servelab.engines.vllm import cmdline as vllm
from servelab.engines.vllm.settings import VllmSettings
from servelab.errors import ConfigError
from servelab.sizing.typed import given, settings_flags


def test_each_reader_turns_its_own_words_into_its_settings() -> None:
    assert llamacpp.settings(["-ub", "256", "-b", "1024", "--kv-unified", "-ngl", "all", "-fa", "auto"]) == (
        LlamaCppSettings(n_gpu_layers=-1, n_batch=1024, n_ubatch=256, kv_unified=True, flash_attn="auto")
    )
    assert (
        llamacpp.settings(["-ot", "exps=CPU"]).cpu_moe
        and llamacpp.settings(["--n-cpu-moe", "12"]).n_cpu_moe == 12
    )
    assert (
        llamacpp.settings([], {"LLAMA_ARG_UBATCH": "128"}).n_ubatch == 128
    )  # the environment llama-server reads
    assert vllm.settings(["--max-num-seqs", "64", "--no-enable-prefix-caching"], {}) == VllmSettings(
        max_num_seqs=64, enable_prefix_caching=False
    )
    assert vllm.settings([], {"VLLM_CPU_KVCACHE_SPACE": "4"}).kv_cache_space_gib == 4
    assert sglang.settings(["--max-mamba-cache-size", "8", "--mem-fraction-static", "0.8"]) == SglangSettings(
        mem_fraction_static=0.8, max_mamba_cache_size=8
    )
    assert sglang.settings(["--disable-radix-cache"]) == SglangSettings(disable_radix_cache=True)
    assert given(VllmSettings(max_num_seqs=64)) == {"max_num_seqs": 64}


@pytest.mark.parametrize(
    ("read", "words", "message"),
    [
        (llamacpp.settings, ["-c", "8192"], "-c after --: give servelab's --context instead (before --)"),
        (llamacpp.settings, ["--temp", "0.7"], "'--temp' after --: not a llama.cpp flag servelab plans"),
        (vllm.settings, ["--max-model-len", "8192"], "--max-model-len after --: give servelab's --context"),
        (vllm.settings, ["-tp", "2"], "-tp after --: give servelab's --gpus"),
        (sglang.settings, ["--max-running-requests", "8"], "give servelab's --parallel"),
        (llamacpp.settings, ["-ub", "0"], "-ub must be a whole number from 1 to 100,000,000 tokens, got 0"),
        (
            llamacpp.settings,
            ["-ngl", "-5"],
            "-ngl must be -1 (all layers), 0 or a positive layer count, got -5",
        ),
        (llamacpp.settings, ["-fa", "maybe"], None),  # -fa takes only on/off/auto: "maybe" is not its value
        (
            vllm.settings,
            ["--gpu-memory-utilization", "1.5"],
            "vLLM --gpu-memory-utilization must be in (0, 1]",
        ),
        (vllm.settings, ["--max-num-seqs", "0"], "--max-num-seqs must be a whole number from 1 to 65,536"),
        (sglang.settings, ["--max-total-tokens", "0"], "sglang --max-total-tokens must be at least 1, got 0"),
    ],
)
def test_a_bad_word_is_one_line_naming_it(read, words, message) -> None:
    with pytest.raises(ConfigError) as caught:
        read(words, {})
    assert "\n" not in str(caught.value)
    if message is not None:
        assert message in str(caught.value)


def test_the_environment_value_is_checked_where_it_is_read() -> None:
    with pytest.raises(ConfigError, match=r"VLLM_CPU_KVCACHE_SPACE='lots': give whole GiB"):
        vllm.settings([], {"VLLM_CPU_KVCACHE_SPACE": "lots"})


def test_every_knob_carries_its_flag_and_help_for_the_reference() -> None:
    for kind in (LlamaCppSettings, VllmSettings, SglangSettings):
        flags = settings_flags(kind)
        assert flags and all(flag and text for _, flag, text in flags)
    assert ("n_ubatch", "-ub") in {(name, flag) for name, flag, _ in settings_flags(LlamaCppSettings)}

"""The pure diff: asked versus got, with each engine's cause and fix."""

from __future__ import annotations

import pytest

from servelab.engines.llamacpp.endpoints import effective_from as llamacpp_effective
from servelab.engines.ollama.endpoints import parse_parameters, training_context
from servelab.engines.ollama.reported import OllamaReported
from servelab.engines.sglang.reported import SglangReported
from servelab.engines.vllm.endpoints import cache_config_labels, kv_capacity_tokens
from servelab.engines.vllm.reported import VllmReported
from servelab.verify import EffectiveConfig, compare
from servelab.verify.asked import Asked, from_command, parse_expect
from servelab.verify.diff import diff, values_match


def _llama(per_slot: int, slots: int, train: int) -> EffectiveConfig:
    return EffectiveConfig(
        engine="llamacpp", context_per_slot=per_slot, slots=slots, context_train=train, model="m.gguf"
    )


def test_field_report_division_line() -> None:
    asked = from_command("llama-server -m /models/m.gguf -ngl 99 -c 262144 -fa on -np 4")
    (m,) = diff(asked, _llama(65536, 4, 262144)).mismatches
    assert m.line == (
        "context per slot is 65536, not 262144: -c is divided by -np 4; "
        "add --kv-unified or use -np 1 (or -c 1048576 for 4 full slots)"
    )
    assert (m.asked, m.got, m.source) == (262144, 65536, "--cmd")


def test_division_and_training_cap_together() -> None:
    asked = from_command("llama-server -c 8192 -np 4")
    (m,) = diff(asked, _llama(2048, 4, 2048)).mismatches
    assert "-c is divided by -np 4" in m.why
    assert m.fix.endswith("the model's training context 2048 still caps each slot")


def test_training_cap_without_division() -> None:
    asked = from_command("llama-server -c 32768 -np 4")  # 8192 per slot, then capped at 2048
    (m,) = diff(asked, _llama(2048, 4, 2048)).mismatches
    assert "capped at the model's training context 2048" in m.why


def test_kv_unified_per_slot_cap() -> None:
    asked = from_command("llama-server -c 65536 -np 4 --kv-unified").merged(parse_expect(["context=65536"]))
    got = _llama(16384, 4, 131072)
    launch_capped = from_command("llama-server -c 65536 -np 4 --kv-unified --kv-unified-per-slot 16384")
    assert diff(launch_capped, got).mismatches == ()  # the cap was asked for: 16384 is what it meant
    (m,) = diff(asked, got).mismatches
    assert m.got == 16384 and m.asked == 65536
    assert "started with other flags" in m.why and "restart with -c 65536 -np 4 --kv-unified" in m.fix


def test_slots_chosen_automatically() -> None:
    asked = from_command("llama-server -m m.gguf -c 8192").merged(parse_expect(["slots=1"]))
    (m,) = diff(asked, _llama(8192, 4, 8192)).mismatches
    assert (
        m.line
        == "slots is 4, not 1: -np was not given, so this build chose the slot count itself; pass -np 1"
    )


def test_slots_without_a_command_line_do_not_claim_np_was_missing() -> None:
    (m,) = diff(parse_expect(["slots=1"]), _llama(8192, 4, 8192)).mismatches
    assert m.line == (
        "slots is 4, not 1: the server was started with -np 4, or without -np (this build then chooses the slot "
        "count itself); pass -np 1"
    )


def test_matching_request_has_no_mismatch_and_lists_what_matched() -> None:
    found = diff(parse_expect(["context=8192", "slots=4", "model=/any/dir/m.gguf"]), _llama(8192, 4, 8192))
    assert found.mismatches == () and found.matched == ("context", "slots", "model")


def test_llamacpp_kv_dtype_unverified() -> None:
    found = diff(parse_expect(["kv_dtype=q8_0"]), _llama(8192, 1, 8192))
    assert found.mismatches == ()
    assert [u.key for u in found.unverified] == ["kv_dtype"]


def test_sglang_context_bounded_by_pool_and_kv_dtype() -> None:
    got = EffectiveConfig(
        engine="sglang",
        context_per_slot=262144,
        max_total_tokens=100000,
        kv_cache_dtype="auto",
        own=SglangReported(mem_fraction_static=0.8),
        tp_size=1,
    )
    found = diff(parse_expect(["context=262144", "kv_dtype=fp8_e5m2", "max_total_tokens=262144"]), got)
    lines = {m.key: m.line for m in found.mismatches}
    assert lines["context"].startswith(
        "usable context is 100000, not 262144: the KV pool holds only 100000 tokens"
    )
    assert "raise --mem-fraction-static (now 0.8)" in lines["context"]
    assert lines["kv_dtype"] == (
        "KV cache dtype is auto, not fp8_e5m2: the server runs with kv_cache_dtype auto; "
        "pass --kv-cache-dtype fp8_e5m2"
    )
    assert "max_total_tokens" in lines


def test_vllm_context_and_unreported_slots() -> None:
    got = EffectiveConfig(
        engine="vllm",
        context_per_slot=8192,
        kv_cache_dtype="fp8",
        max_total_tokens=500000,
        own=VllmReported(gpu_memory_utilization=0.9),
    )
    found = diff(parse_expect(["context=32768", "kv_dtype=fp8", "slots=64", "max_total_tokens=400000"]), got)
    (m,) = found.mismatches
    assert m.why == "max_model_len is 8192, not 32768: the server runs with max_model_len 8192"
    assert "--gpu-memory-utilization (now 0.9)" in m.fix
    assert [u.key for u in found.unverified] == ["slots"]
    assert set(found.matched) == {"kv_dtype", "max_total_tokens"}


def test_engine_written_for_another_engine_is_a_mismatch() -> None:
    result = compare("http://127.0.0.1:1", _llama(8192, 1, 8192), from_command("vllm serve m"))
    assert [m.key for m in result.mismatches] == ["engine", "model"]
    assert result.mismatches[0].why.startswith("engine is llamacpp, not vllm")
    assert not result.ok


def test_generic_engine_falls_back_to_a_plain_sentence() -> None:
    got = EffectiveConfig(engine="openai", context_per_slot=4096, model="x")
    (m,) = diff(Asked({"context": 8192}, {"context": "--expect"}), got).mismatches
    assert m.line == "context per request is 4096, not 8192; check the launch flags"


@pytest.mark.parametrize(
    ("key", "asked", "got", "same"),
    [
        ("kv_dtype", "fp16", "f16", True),
        ("kv_dtype", "bf16", "auto", True),
        ("kv_dtype", "fp8", "auto", False),
        ("kv_dtype", "fp8", "fp8_e4m3", True),
        ("kv_dtype", "fp8_e5m2", "fp8_e4m3", False),
        ("model", "/models/Qwen/Q.gguf", "Q.gguf", True),
        ("model", "Qwen/Qwen3-8B", "qwen/qwen3-8b", True),
        ("model", "a.gguf", "b.gguf", False),
        ("max_total_tokens", 1000, 2000, True),
        ("max_total_tokens", 2000, 1000, False),
        ("context", 8192, 16384, False),
    ],
)
def test_values_match(key: str, asked: object, got: object, same: bool) -> None:
    assert values_match(key, asked, got) is same


def test_llamacpp_effective_from_props_models_slots() -> None:
    props = {
        "default_generation_settings": {"n_ctx": 2048, "params": {"speculative.types": "none"}},
        "total_slots": 4,
        "model_alias": "m.gguf",
        "build_info": "b1-abc",
        "chat_template": "{{ long }}",
    }
    models = {"data": [{"id": "m.gguf", "owned_by": "llamacpp", "meta": {"n_ctx_train": 8192}}]}
    slots = [{"id": i, "n_ctx": 2048, "speculative": i == 0} for i in range(4)]
    fields = llamacpp_effective(props, models, slots)
    assert (fields["context_per_slot"], fields["slots"], fields["context_train"]) == (2048, 4, 8192)
    assert fields["speculative"] == {"enabled": True}
    assert llamacpp_effective(props, models, None)["speculative"] == {"enabled": False}
    assert "chat_template" not in fields["raw"]["props"]


def test_vllm_cache_config_parsing() -> None:
    text = 'vllm:cache_config_info{block_size="16",cache_dtype="fp8_e5m2",kv_cache_size_tokens="123433",engine="0"} 1.0\n'
    labels = cache_config_labels("# HELP x\n" + text)
    assert labels["cache_dtype"] == "fp8_e5m2"
    assert kv_capacity_tokens(labels) == 123433
    assert kv_capacity_tokens({"num_gpu_blocks": "10", "block_size": "16"}) == 160
    assert kv_capacity_tokens({"num_gpu_blocks": "None", "block_size": "16"}) is None
    assert cache_config_labels("vllm:other 1\n") == {}


def test_ollama_parameters_and_training_context() -> None:
    assert parse_parameters('num_ctx 8192\nstop "<|eot_id|>"\nstop "x"') == {
        "num_ctx": "8192",
        "stop": "<|eot_id|>",
    }
    assert training_context({"general.architecture": "qwen3", "qwen3.context_length": 40960}) == 40960
    assert training_context({}) is None


def test_notes_per_engine() -> None:
    sglang = diff(Asked(), EffectiveConfig(engine="sglang", slots=32))
    assert len(sglang.notes) == 1 and sglang.notes[0].startswith(
        "max_running_requests 32 is the command-line value"
    )
    assert diff(Asked(), EffectiveConfig(engine="sglang")).notes == ()
    assert diff(Asked(), EffectiveConfig(engine="ollama", own=OllamaReported(gpu_fraction=1.0))).notes == ()
    assert diff(Asked(), _llama(2048, 4, 8192)).notes == ()

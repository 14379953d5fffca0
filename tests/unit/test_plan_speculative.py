"""Speculative decoding / MTP in the planner (servelab/sizing/fit.py Speculative): the draft or MTP weights, their KV,
vLLM's lookahead slots, sglang's reserve, and the flags each engine's writer emits."""

from __future__ import annotations

import pytest

from servelab.engines.sglang.memory import default_mem_fraction_static
from servelab.errors import ConfigError
from servelab.hardware.gpus import find_gpu
from servelab.model.load import load_model
from servelab.plan.make import make_plan
from servelab.sizing.fit import Speculative

MIB = 2**20


@pytest.fixture(scope="module")
def qwen35():  # type: ignore[no-untyped-def]
    return load_model("Qwen/Qwen3.5-27B", quant="awq")


def test_vllm_mtp_loads_the_mtp_layer_and_pads_the_groups_as_vllm_logs(qwen35) -> None:  # type: ignore[no-untyped-def]
    gpu = find_gpu("rtx5090")
    base = make_plan(qwen35, gpu, engine="vllm", context=32768, kv_dtype="fp8")
    mtp = make_plan(
        qwen35, gpu, engine="vllm", context=32768, kv_dtype="fp8", speculative=Speculative("mtp", 3)
    )
    mtp_group = qwen35.weight_group("mtp")
    assert mtp_group is not None
    assert (base.memory_bytes.weights_mtp, mtp.memory_bytes.weights_mtp) == (0, mtp_group.bytes)
    # the pool's budget loses exactly the MTP weights and the graphs' change (activations and non-torch memory are
    # unchanged). An fp8 cache on an RTX 5090 runs FlashInfer: without MTP its first FULL capture holds the 394 MiB
    # decode workspace; with MTP vLLM drops to PIECEWISE ("not supported with spec-decode for attention backend
    # FlashInferBackend", club-3090 issue 617), so no FULL capture and no workspace (docs/reference/memory.md §3)
    graphs = int(str(mtp.details["cuda_graph_bytes"])) - int(str(base.details["cuda_graph_bytes"]))
    assert graphs < -300 * MIB
    assert base.details["kv_budget_bytes"] - mtp.details["kv_budget_bytes"] == mtp_group.bytes + graphs
    # docs/reference/memory.md §9 V6: "Add 3 padding layers, may waste at most 6.25%" for Qwen3.5-27B + MTP
    assert (base.details["padding_layers"], mtp.details["padding_layers"]) == (0, 3)
    assert mtp.command[-2:] == ("--speculative-config", '{"method":"mtp","num_speculative_tokens":3}')


def test_vllm_reserves_lookahead_slots_for_the_speculative_tokens() -> None:
    # allocate_slots(num_lookahead_tokens=k): a 32768-token request (a whole number of 16-token blocks) needs one
    # more block per attention layer group while it drafts 3 tokens
    model = load_model("meta-llama/Llama-3.1-8B")
    gpu = find_gpu("rtx4090")
    plan = make_plan(model, gpu, engine="vllm", context=32768, speculative=Speculative("ngram", 3))
    blocks, block = plan.details["num_blocks"], plan.details["block_size"]
    assert block == 16 and plan.memory_bytes.weights_mtp == 0
    assert plan.details["max_concurrency"] == round(blocks / (32768 // 16 + 1), 2)
    assert plan.command[-1] == '{"method":"ngram","num_speculative_tokens":3}'


def test_sglang_nextn_adds_the_draft_layer_to_each_kv_cell_and_reserves_2_gib(qwen35) -> None:  # type: ignore[no-untyped-def]
    gpu = find_gpu("rtx4090-48g")
    kwargs = {"engine": "sglang", "context": 262144, "kv_dtype": "fp8_e5m2"}
    base = make_plan(qwen35, gpu, **kwargs)  # type: ignore[arg-type]
    mtp = make_plan(qwen35, gpu, speculative=Speculative("mtp", 3), **kwargs)  # type: ignore[arg-type]
    # one more full-attention layer per token: 2 (K, V) x 4 KV heads x 256 x 1 byte (fp8)
    assert mtp.details["kv_cell_bytes"] - base.details["kv_cell_bytes"] == 2 * 4 * 256
    mib = gpu.memory_bytes / MIB
    assert mtp.details["mem_fraction_static"] == default_mem_fraction_static(mib, speculative=True)[0]
    assert default_mem_fraction_static(mib, speculative=True)[1] - default_mem_fraction_static(mib)[1] == 2048
    assert mtp.memory_bytes.weights_mtp == qwen35.weight_group("mtp").bytes
    # the field report's EAGLE-with-MTP settings: steps 3, top-k 1, 4 draft tokens (field-report.md §4)
    assert mtp.command[-8:] == (
        "--speculative-algorithm",
        "NEXTN",
        "--speculative-num-steps",
        "3",
        "--speculative-eagle-topk",
        "1",
        "--speculative-num-draft-tokens",
        "4",
    )


def test_llamacpp_draft_model_adds_its_weights_and_its_kv_for_every_cell() -> None:
    target = load_model("meta-llama/Llama-3.1-8B", quant="Q4_K_M")
    draft = load_model("meta-llama/Llama-3.2-1B", quant="Q8_0")
    gpu = find_gpu("rtx4090")
    spec = Speculative("draft", 8, draft=draft, draft_path="/models/Llama-3.2-1B-Q8_0.gguf")
    base = make_plan(target, gpu, engine="llamacpp", context=8192)
    with_draft = make_plan(target, gpu, engine="llamacpp", context=8192, speculative=spec)
    # the draft's context has the target's 8192 cells, f16 KV: 16 layers x 2 x 8 KV heads x 64 x 2 B per cell
    assert with_draft.memory_bytes.kv_cache - base.memory_bytes.kv_cache == 8192 * 16 * 2 * 8 * 64 * 2
    assert with_draft.memory_bytes.weights_mtp == pytest.approx(draft.weight_bytes, rel=0.01)
    assert with_draft.command[-4:] == ("-md", "/models/Llama-3.2-1B-Q8_0.gguf", "--spec-draft-n-max", "8")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"method": "medusa", "num_tokens": 3}, "speculative method 'medusa' is not known"),
        ({"method": "mtp", "num_tokens": 0}, "speculative tokens must be 1 to 16, got 0"),
        ({"method": "draft", "num_tokens": 4}, "speculative method draft needs a draft model"),
    ],
)
def test_a_bad_speculative_setting_is_one_line(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Speculative(**kwargs)  # type: ignore[arg-type]


def test_mtp_on_a_model_without_mtp_layers_is_refused() -> None:
    model = load_model("meta-llama/Llama-3.1-8B")
    with pytest.raises(ConfigError, match="has no MTP layers"):
        make_plan(model, find_gpu("rtx4090"), engine="vllm", context=4096, speculative=Speculative("mtp", 2))
    with pytest.raises(ConfigError, match="with a draft model"):
        make_plan(
            model, find_gpu("rtx4090"), engine="llamacpp", context=4096, speculative=Speculative("mtp", 2)
        )

"""Plans at the JSON edge: `Plan.from_json` reads back exactly what `servelab plan --json` wrote, the partial
`SavedPlan` keeps a missing field apart from a zero, and a wrong type is one line naming the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servelab.cli.output import to_jsonable
from servelab.errors import ConfigError
from servelab.hardware.gpus import find_gpu
from servelab.model.load import load_model
from servelab.plan.io import load_plan, plan_document
from servelab.plan.make import make_plan
from servelab.plan.saved import SavedCeilings, SavedMemory, SavedPlan, saved_plan
from servelab.sizing.types import Plan

PLANS = {  # name -> (model, gpu, make_plan keywords)
    "llamacpp-qwen3-8b-4090": (
        "Qwen/Qwen3-8B",
        "rtx4090",
        dict(engine="llamacpp", quant="Q4_K_M", context=32768, kv_dtype="q8_0"),
    ),
    "sglang-qwen3.5-27b-tp2": (
        "Qwen/Qwen3.5-27B",
        "rtx4090-48g",
        dict(
            engine="sglang",
            quant="awq",
            context=262144,
            kv_dtype="fp8_e5m2",
            gpus=2,
            interconnect="pcie-host-staged",
        ),
    ),
    "vllm-llama-8b-h100": (
        "meta-llama/Llama-3.1-8B-Instruct",
        "h100-sxm",
        dict(engine="vllm", context=16384, parallel=4),
    ),
    "vllm-qwen3-30b-a3b-a100-tp2": (
        "Qwen/Qwen3-30B-A3B",
        "a100-80g",
        dict(engine="vllm", context=8192, gpus=2),
    ),
    "llamacpp-gpt-oss-20b-l4": (
        "openai/gpt-oss-20b",
        "l4",
        dict(engine="llamacpp", quant="Q8_0", context=8192),
    ),
}


def _plan(name: str) -> Plan:
    model, gpu, keywords = PLANS[name]
    return make_plan(load_model(model), find_gpu(gpu), **keywords)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", PLANS)
def test_a_plan_reads_back_equal_from_its_json(name: str) -> None:
    plan = _plan(name)
    assert Plan.from_json(to_jsonable(plan)) == plan
    assert Plan.from_json(json.loads(json.dumps(to_jsonable(plan)))) == plan  # through the text, too
    assert saved_plan(to_jsonable(plan)) == saved_plan(plan)  # the readers' form, from either side


def test_tensor_parallel_plans_carry_their_cost_back() -> None:
    plan = Plan.from_json(to_jsonable(_plan("sglang-qwen3.5-27b-tp2")))
    assert plan.tensor_parallel == 2 and plan.parallel_cost is not None and plan.parallel_cost.tp == 2
    assert isinstance(plan.decode_batch_tok_s, tuple) and isinstance(plan.command, tuple)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"context": "8192"}, "plans[0].context is a string, not an integer"),
        ({"fits": 1}, "plans[0].fits is a number, not a boolean"),
        ({"context": True}, "plans[0].context is a boolean, not an integer"),
        (
            {"memory_bytes": {"total": 1}},
            "plans[0].memory_bytes lacks weights, kv_cache, recurrent_state, activations, runtime, capacity",
        ),
        ({"decode_ceiling_tok_s": [1.0]}, "plans[0].decode_ceiling_tok_s is a list, not an object"),
        ({"command": "llama-server -m x"}, "plans[0].command is a string, not a list"),
        ({"warnings": [1]}, "plans[0].warnings[0] is a number, not a string"),
        ({"parallel_cost": {"tp": "2"}}, "plans[0].parallel_cost.tp is a string, not an integer"),
        ({"efficiency": {"decode": None}}, "plans[0].efficiency.decode is a null, not a number"),
    ],
)
def test_a_wrong_type_in_a_complete_plan_names_the_field(change: dict, message: str) -> None:
    data = {**to_jsonable(_plan("llamacpp-qwen3-8b-4090")), **change}
    with pytest.raises(ConfigError) as caught:
        Plan.from_json(data, "plans[0]")
    assert str(caught.value) == message


def test_a_complete_plan_lacking_fields_names_them() -> None:
    with pytest.raises(ConfigError, match=r"^plan lacks quant, context, kv_dtype, fits, memory_bytes, "):
        Plan.from_json({"engine": "vllm"})


def test_a_partial_plan_keeps_missing_apart_from_zero() -> None:
    assert saved_plan({"context": 8192}) == SavedPlan(context=8192)
    zero = saved_plan({"context": 0, "memory_bytes": {"weights_mtp": 0}, "decode_ceiling_tok_s": {}})
    assert (zero.context, zero.slots, zero.memory_bytes) == (0, None, SavedMemory(weights_mtp=0))
    assert zero.decode_ceiling_tok_s == SavedCeilings() and zero.fits is None
    assert saved_plan({"argv": ["llama-server", "-c", "4096"]}).command == ("llama-server", "-c", "4096")
    assert saved_plan({"command": "llama-server -c 4096"}).command == "llama-server -c 4096"
    with pytest.raises(ConfigError, match=r"^plans\[0\]\.decode_batch_tok_s\[0\] lacks aggregate_tok_s$"):
        saved_plan({"decode_batch_tok_s": [{"batch": 1}]}, "plans[0]")


def test_a_plan_file_with_a_wrong_type_is_one_line_naming_flag_file_and_field(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    path.write_text('{"model": "m", "plans": [{"engine": "vllm"}, {"context": "long"}]}')
    with pytest.raises(ConfigError) as caught:
        load_plan(path, flag="--plan", required=())
    assert str(caught.value) == f"--plan {path}: plans[1].context is a string, not an integer"
    path.write_text('{"model": 7, "plans": [{}]}')
    with pytest.raises(ConfigError) as caught:
        load_plan(path, flag="--plan", required=())
    assert str(caught.value) == f"--plan {path}: model is a number, not a string"


def test_a_saved_plan_file_reads_as_a_typed_document(tmp_path: Path) -> None:
    plan = _plan("sglang-qwen3.5-27b-tp2")
    path = tmp_path / "plan.json"
    path.write_text(json.dumps({"model": plan.model, "gpu": plan.gpu, "plans": [to_jsonable(plan)]}))
    doc = load_plan(path)
    assert (doc.model, doc.gpu, doc.plans) == (plan.model, plan.gpu, (saved_plan(plan),))
    bare = plan_document({"engine": "vllm", "model": "m"}, bare_entry=True)
    assert (bare.model, bare.plans) == ("m", (SavedPlan(engine="vllm", model="m"),))

"""Tensor-parallel all-reduce cost, and the field report's verdict (docs/reference/field-report.md §1-2): on two 48 GB
4090s without P2P, TP=2 decodes slower than one card; with NVLink-class links it would not."""

from __future__ import annotations

import dataclasses

import pytest

from servelab.errors import ConfigError
from servelab.hardware.gpus import find_gpu
from servelab.model.load import load_model
from servelab.plan.make import make_plan
from servelab.sizing.parallel import LATENCY_S, link_bandwidth_gb_s, tensor_parallel_cost
from tests.unit.plan_models import dense_gqa


def test_two_allreduces_per_layer_of_hidden_bf16() -> None:
    model = dense_gqa()
    cost = tensor_parallel_cost(model, find_gpu("a100-80g"), 2, "nvlink")
    assert cost.allreduces_per_token == 2 * 32
    assert cost.bytes_per_allreduce == 4096 * 2
    one = LATENCY_S["nvlink"] + 2 * (2 - 1) / 2 * 8192 / (300 * 1e9)
    assert cost.allreduce_s == pytest.approx(one)
    assert cost.per_token_s == pytest.approx(64 * one)


def test_one_gpu_has_no_allreduce() -> None:
    assert tensor_parallel_cost(dense_gqa(), find_gpu("l4"), 1, "pcie-p2p").per_token_s == 0


def test_links_order_nvlink_p2p_host_staged() -> None:
    gpu = find_gpu("rtx3090")
    assert (
        link_bandwidth_gb_s(gpu, "nvlink")
        > link_bandwidth_gb_s(gpu, "pcie-p2p")
        > link_bandwidth_gb_s(gpu, "pcie-host-staged")
    )
    model = dense_gqa()
    times = [
        tensor_parallel_cost(model, gpu, 2, i).per_token_s for i in ("nvlink", "pcie-p2p", "pcie-host-staged")
    ]
    assert times == sorted(times)


def test_nvlink_on_a_card_without_it_is_refused() -> None:
    with pytest.raises(ConfigError, match="no NVLink"):
        link_bandwidth_gb_s(find_gpu("rtx4090"), "nvlink")
    with pytest.raises(ConfigError, match="pcie-host-staged"):
        link_bandwidth_gb_s(find_gpu("rtx4090"), "infiniband")


def _brief_plan(interconnect: str, gpu_name: str = "rtx4090-48g"):
    model = load_model("Qwen/Qwen3.5-27B")
    return make_plan(
        model,
        find_gpu(gpu_name),
        engine="sglang",
        quant="awq",
        context=262144,
        kv_dtype="fp8_e5m2",
        gpus=2,
        interconnect=interconnect,
    )


def test_host_staged_tp2_is_slower_than_one_card() -> None:
    plan = _brief_plan("pcie-host-staged")
    assert plan.decode_ceiling_tok_s.full_context < plan.single_gpu_decode_tok_s
    assert any("below one GPU" in w for w in plan.warnings)


def test_fast_links_make_tp2_faster_than_one_card() -> None:
    gpu = dataclasses.replace(find_gpu("rtx4090-48g"), nvlink_gb_s=600)
    model = load_model("Qwen/Qwen3.5-27B")
    plan = make_plan(
        model,
        gpu,
        engine="sglang",
        quant="awq",
        context=262144,
        kv_dtype="fp8_e5m2",
        gpus=2,
        interconnect="nvlink",
    )
    assert plan.decode_ceiling_tok_s.full_context > plan.single_gpu_decode_tok_s
    assert plan.parallel_cost is not None and plan.parallel_cost.tp == 2


def test_llamacpp_splits_layers_not_tensors() -> None:
    model = load_model("Qwen/Qwen3.5-27B")
    kw = dict(engine="llamacpp", quant="Q8_0", context=65536)
    one = make_plan(model, find_gpu("rtx4090-48g"), **kw)
    two = make_plan(model, find_gpu("rtx4090-48g"), gpus=2, interconnect="pcie-p2p", **kw)
    assert two.memory_bytes.weights == one.memory_bytes.weights // 2
    assert two.decode_ceiling_tok_s == one.decode_ceiling_tok_s and two.parallel_cost is None
    assert "--split-mode" in two.command and any("pipeline" in w for w in two.warnings)

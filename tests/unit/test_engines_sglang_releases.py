"""sglang's default --mem-fraction-static by release (servelab/engines/sglang/releases.py), each case with the
numbers of that release's server_args.py (docs/reference/memory.md §2 "mem_fraction_static default, per release")."""

from __future__ import annotations

import pytest

from servelab.engines.sglang.memory import default_mem_fraction_static, sglang_memory
from servelab.engines.sglang.releases import parse_release, release_mem_fraction_static
from servelab.errors import ConfigError
from tests.unit.plan_models import dense_gqa

H100, H200, B200, MI300X, RTX4090 = 81559, 143771, 183359, 196608, 24564  # MiB, as the catalog holds them


def test_release_names_as_tags_and_logs_spell_them() -> None:
    assert parse_release("0.4.4.post1") == (0, 4, 4, 1)
    assert parse_release("v0.4.8.post1") == (0, 4, 8, 1)
    assert parse_release("v0.5.8.post1-rocm720-mi35x-20260218") == (0, 5, 8, 1)
    assert parse_release("0.5.9") == (0, 5, 9, 0)
    assert parse_release("0.4.10") > parse_release("0.4.9.post6")  # type: ignore[operator]
    assert parse_release(None) is None
    with pytest.raises(ConfigError, match="not a version number"):
        parse_release("latest")


@pytest.mark.parametrize(
    ("tp", "fraction"), [(1, 0.88), (2, 0.87), (3, 0.87), (4, 0.85), (8, 0.81), (16, 0.79)]
)
def test_up_to_0_4_5_the_default_is_by_tp_size(tp: int, fraction: float) -> None:
    # 0.4.4.post1: `if self.tp_size >= 16: 0.79 elif >= 8: 0.81 elif >= 4: 0.85 elif >= 2: 0.87 else: 0.88`,
    # whatever the card's memory
    assert release_mem_fraction_static((0, 4, 4, 1), H100, tp=tp) == fraction
    assert release_mem_fraction_static((0, 4, 5, 0), B200, tp=tp) == fraction


def test_0_4_6_keeps_13_gib_on_cards_above_80_gib() -> None:
    # 0.4.6 / 0.4.6.post1: the TP table up to 81920 MiB, else (gpu_mem - 1024 * 13) / gpu_mem
    assert release_mem_fraction_static((0, 4, 6, 0), H100, tp=2) == 0.87
    assert release_mem_fraction_static((0, 4, 6, 1), H200) == (H200 - 13 * 1024) / H200


def test_0_4_6_post2_blends_towards_an_18_gib_reserve_above_96_gib() -> None:
    # 0.4.6.post2-post5: mfs = 0.88 above 81920 MiB, then above 96 GiB
    # min(mfs + 48 * 1024 * (1 - mfs) / gpu_mem, (gpu_mem - 1024 * 18) / gpu_mem)
    assert (
        release_mem_fraction_static((0, 4, 6, 2), H200) == (H200 - 18 * 1024) / H200
    )  # the reserve is lower
    mi355x = 294912
    blended = 0.88 + 48 * 1024 * 0.12 / mi355x
    assert release_mem_fraction_static((0, 4, 6, 2), mi355x) == blended < (mi355x - 18 * 1024) / mi355x
    assert release_mem_fraction_static((0, 4, 6, 5), H100, tp=4) == 0.85


def test_0_4_7_caps_big_cuda_cards_and_holds_more_back_for_speculative_decoding() -> None:
    # 0.4.7: above 180 * 1000 MiB on CUDA 0.79; speculative decoding keeps 20 GiB above 96 GiB, x 0.95 below
    assert release_mem_fraction_static((0, 4, 7, 0), B200) == 0.79
    assert release_mem_fraction_static((0, 4, 7, 0), MI300X, cuda=False) == min(
        0.88 + 48 * 1024 * 0.12 / MI300X, (MI300X - 18 * 1024) / MI300X
    )
    assert release_mem_fraction_static((0, 4, 7, 0), H200, speculative=True) == min(
        0.88 + 48 * 1024 * 0.12 / H200, (H200 - 20 * 1024) / H200
    )
    assert release_mem_fraction_static((0, 4, 7, 0), H100, speculative=True) == 0.88 * 0.95


@pytest.mark.parametrize(
    ("gpu_mib", "tp", "reserve_gib"),
    [(RTX4090, 1, 2.9), (H100, 1, 10.0), (H100, 8, 13.5), (H200, 4, 14.0), (MI300X, 8, 32.0)],
)
def test_0_4_7_post1_to_0_5_2_reserve_by_memory_tier(gpu_mib: int, tp: int, reserve_gib: float) -> None:
    # 0.4.8.post1 / 0.4.9.post2: (2.8 + tp/10) GiB below 35 GiB, (9.5 + tp/2) below 90, (12 + tp/2) below 160,
    # 32 GiB above; mfs = round((gpu_mem - reserved_mem) / gpu_mem, 3)
    expected = round((gpu_mib - reserve_gib * 1024) / gpu_mib, 3)
    for release in ((0, 4, 7, 1), (0, 4, 8, 1), (0, 4, 9, 2), (0, 5, 2, 0)):
        assert release_mem_fraction_static(release, gpu_mib, tp=tp) == expected
    assert release_mem_fraction_static((0, 4, 9, 2), H100, speculative=True) == round(
        (H100 - 12 * 1024) / H100, 3
    )  # + 2 GiB for the draft


def test_from_0_5_3_the_current_formula_applies() -> None:
    assert release_mem_fraction_static((0, 5, 3, 0), H100) is None
    assert default_mem_fraction_static(H100, release=(0, 5, 8, 1)) == default_mem_fraction_static(H100)


def test_an_older_release_changes_the_kv_pool() -> None:
    """The FA3 Llama-3.1-8B case of sglang PR #4760 (main of 2025-03-25, 0.4.4.x): 0.88 of the free memory, where
    today's formula keeps 13,440 MiB back on an 80 GB card."""
    model = dense_gqa()
    kwargs = dict(gpu_memory_bytes=H100 * 2**20, weights_bytes=15 * 2**30, context_length=8192)
    old = sglang_memory(model, release=(0, 4, 4, 1), **kwargs)  # type: ignore[arg-type]
    now = sglang_memory(model, **kwargs)  # type: ignore[arg-type]
    assert old.mem_fraction_static == 0.88 and now.mem_fraction_static == round((H100 - 13440) / H100, 3)
    assert old.kv_pool_bytes > now.kv_pool_bytes
    assert old.pool_budget_bytes == int(0.88 * H100 * 2**20) - 15 * 2**30


def test_aiter_on_rocm_scales_the_fraction_above_8192_tokens() -> None:
    """server_args.py `_handle_attention_backend_compatibility` (0.5.4.post1: x 0.90; 0.5.4.post2 on: x 0.85):
    ROCm, attention backend aiter, context_len > 8192; an explicit fraction is scaled as well."""
    from servelab.engines.sglang.releases import aiter_fraction_factor, default_attention_backend_rocm

    long = dict(rocm=True, attention_backend="aiter", context_len=32768)
    assert aiter_fraction_factor((0, 5, 4, 0), **long) == 1.0  # type: ignore[arg-type]
    assert aiter_fraction_factor((0, 5, 4, 1), **long) == 0.90  # type: ignore[arg-type]
    assert aiter_fraction_factor((0, 5, 4, 2), **long) == aiter_fraction_factor(None, **long) == 0.85  # type: ignore[arg-type]
    assert aiter_fraction_factor(None, rocm=True, attention_backend="aiter", context_len=8192) == 1.0
    assert aiter_fraction_factor(None, rocm=True, attention_backend="triton", context_len=32768) == 1.0
    assert aiter_fraction_factor(None, rocm=False, attention_backend="aiter", context_len=32768) == 1.0
    assert default_attention_backend_rocm(mla=False, kv_heads_per_gpu=8) == "aiter"
    assert default_attention_backend_rocm(mla=True, kv_heads_per_gpu=16) == "aiter"
    assert default_attention_backend_rocm(mla=True, kv_heads_per_gpu=8) == "triton"
    model = dense_gqa()
    kwargs = dict(gpu_memory_bytes=196608 * 2**20, weights_bytes=15 * 2**30, context_length=32768)
    cuda = sglang_memory(model, **kwargs)  # type: ignore[arg-type]
    rocm = sglang_memory(model, cuda=False, rocm=True, **kwargs)  # type: ignore[arg-type]
    assert rocm.mem_fraction_static == pytest.approx(cuda.mem_fraction_static * 0.85)
    assert rocm.kv_pool_bytes < cuda.kv_pool_bytes
    explicit = sglang_memory(model, cuda=False, rocm=True, mem_fraction_static=0.9, **kwargs)  # type: ignore[arg-type]
    assert explicit.mem_fraction_static == pytest.approx(0.9 * 0.85)
    triton = sglang_memory(model, cuda=False, rocm=True, attention_backend="triton", **kwargs)  # type: ignore[arg-type]
    assert triton.mem_fraction_static == cuda.mem_fraction_static
    old = sglang_memory(model, cuda=False, rocm=True, release=(0, 4, 8, 1), **kwargs)  # type: ignore[arg-type]
    assert (
        old.mem_fraction_static
        == sglang_memory(model, cuda=False, release=(0, 4, 8, 1), **kwargs).mem_fraction_static
    )  # type: ignore[arg-type]


def test_a_plan_on_an_amd_card_takes_the_aiter_factor() -> None:
    from servelab.hardware.gpus import find_gpu
    from servelab.model.load import load_model
    from servelab.plan.make import make_plan

    model, mi300x = load_model("Qwen/Qwen3-8B"), find_gpu("mi300x")
    assert mi300x.is_rocm and not find_gpu("h100-sxm").is_rocm
    short, long = (
        float(make_plan(model, mi300x, engine="sglang", context=c).details["mem_fraction_static"])  # type: ignore[arg-type]
        for c in (8192, 32768)
    )
    assert long == pytest.approx(short * 0.85)

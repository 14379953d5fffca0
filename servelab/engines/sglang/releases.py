"""sglang's default --mem-fraction-static, release by release, and the release names `plan --engine-version` takes.

Read in the release wheels on PyPI, python/sglang/srt/server_args.py `ServerArgs.__post_init__` (later
`_handle_gpu_memory_settings`); gpu_mem is the card's capacity in MiB as sglang reads it (nvidia-smi / amd-smi).
docs/reference/memory.md §2 "mem_fraction_static default, per release" has the excerpts:
- up to 0.4.6.post1, by TP size: 0.88 at tp 1, 0.87 at tp >= 2, 0.85 at >= 4, 0.81 at >= 8, 0.79 at >= 16
  (0.4.6 and 0.4.6.post1 on cards above 81920 MiB: (gpu_mem - 13 GiB) / gpu_mem);
- 0.4.6.post2 to 0.4.7: the TP table up to 81920 MiB, else 0.88; above 96 GiB min(mfs + 48 GiB x (1 - mfs) /
  gpu_mem, (gpu_mem - 18 GiB) / gpu_mem); 0.4.7 also 0.79 above 180,000 MiB on CUDA, 20 GiB held back with
  speculative decoding, and x 0.95 with it on smaller cards;
- 0.4.7.post1 to 0.5.2, a reserve by memory tier: (2.8 + tp / 10) GiB below 35 GiB, (9.5 + tp / 2) GiB below
  90 GiB, (12 + tp / 2) GiB below 160 GiB, 32 GiB above, + 2 GiB with speculative decoding (+ 4 GiB with DP
  attention, which servelab does not plan), mfs = round((gpu_mem - reserve) / gpu_mem, 3);
- from 0.5.3 the formula of memory.py `default_mem_fraction_static` (chunked prefill, CUDA-graph batch, TP).
"""

from __future__ import annotations

import re

from servelab.errors import ConfigError

Release = tuple[int, int, int, int]  # major, minor, patch, post

GIB_MIB = 1024
CURRENT_FORMULA = (0, 5, 3, 0)  # _handle_gpu_memory_settings' reserve from chunked prefill and CUDA graphs
RESERVE_TIERS = (0, 4, 7, 1)
LARGE_CARD_BLEND = (0, 4, 6, 2)
TP_TABLE_CEILING_MIB = 81920  # 0.4.6 on: the TP table only up to this capacity
TP_TABLE = ((16, 0.79), (8, 0.81), (4, 0.85), (2, 0.87), (1, 0.88))

_RELEASE = re.compile(r"v?(\d+)\.(\d+)(?:\.(\d+))?(?:\.?post(\d+))?", re.IGNORECASE)


def parse_release(text: str | None) -> Release | None:
    """'0.4.4.post1', 'v0.4.8.post1', 'v0.5.8.post1-rocm720-mi35x' -> (0, 4, 8, 1); None -> None (the current)."""
    if text is None:
        return None
    found = _RELEASE.match(text.strip())
    if not found:
        raise ConfigError(f"sglang release {text!r} is not a version number; pass one like 0.4.8.post1")
    major, minor, patch, post = found.groups()
    return int(major), int(minor), int(patch or 0), int(post or 0)


def by_tp(tp: int) -> float:
    """The TP table of the early releases."""
    return next(fraction for least, fraction in TP_TABLE if tp >= least)


def _reserve_tier_mib(gpu_mib: float, tp: int) -> float:
    """0.4.7.post1-0.5.2: what each memory tier keeps outside the static pools, MiB."""
    if gpu_mib < 35 * GIB_MIB:
        return (2.8 + tp / 10) * GIB_MIB
    if gpu_mib < 90 * GIB_MIB:
        return (9.5 + tp / 2) * GIB_MIB
    if gpu_mib < 160 * GIB_MIB:
        return (12 + tp / 2) * GIB_MIB
    return 32.0 * GIB_MIB


def _large_card_blend(release: Release, gpu_mib: float, tp: int, speculative: bool, cuda: bool) -> float:
    """0.4.6.post2-0.4.7: the TP table up to 81920 MiB, a blend towards a fixed reserve above 96 GiB."""
    fraction = by_tp(tp) if gpu_mib <= TP_TABLE_CEILING_MIB else 0.88
    late = release >= (0, 4, 7, 0)
    if late and cuda and gpu_mib > 180 * 1000:
        return 0.79
    if gpu_mib > 96 * GIB_MIB:
        reserve = (20 if late and speculative else 18) * GIB_MIB
        return min(fraction + 48 * GIB_MIB * (1 - fraction) / gpu_mib, (gpu_mib - reserve) / gpu_mib)
    return fraction * 0.95 if late and speculative else fraction


def release_mem_fraction_static(
    release: Release,
    gpu_mib: float,
    *,
    tp: int = 1,
    speculative: bool = False,
    cuda: bool = True,
) -> float | None:
    """The default mem_fraction_static of a release before 0.5.3; None from 0.5.3 on (the current formula)."""
    if release >= CURRENT_FORMULA:
        return None
    if release >= RESERVE_TIERS:
        reserve = _reserve_tier_mib(gpu_mib, tp) + 2 * GIB_MIB * speculative
        return round((gpu_mib - reserve) / gpu_mib, 3)
    if release >= LARGE_CARD_BLEND:
        return _large_card_blend(release, gpu_mib, tp, speculative, cuda)
    if release >= (0, 4, 6, 0) and gpu_mib > TP_TABLE_CEILING_MIB:
        return (gpu_mib - 13 * GIB_MIB) / gpu_mib
    return by_tp(tp)


# ROCm, attention backend aiter, context above 8192: mem_fraction_static is scaled down (server_args.py
# `_handle_attention_backend_compatibility`, "AMD platforms backends"; from 0.5.23 arg_groups/attention_hook.py)
# to leave the aiter attention workspace outside the static pools. Read in the wheels: absent up to 0.5.4,
# x 0.90 in 0.5.4.post1, x 0.85 from 0.5.4.post2 (read up to 0.5.23). The factor scales an explicit
# --mem-fraction-static as well (0.5.23: unless SGLANG_AITER_HONOR_EXPLICIT_MEM_FRACTION is set).
AITER_FIRST = (0, 5, 4, 1)
AITER_085 = (0, 5, 4, 2)
AITER_LONG_CONTEXT = 8192
AITER_MLA_HEADS = (16, 128)  # "current aiter only support head number 16 or 128 head number"


def default_attention_backend_rocm(*, mla: bool, kv_heads_per_gpu: int) -> str:
    """The attention backend sglang picks on ROCm when none is given (0.5.4.post1 on): aiter for MHA/GQA; for MLA
    aiter only when the KV heads per GPU (model_config.get_num_kv_heads(tp)) are 16 or 128, else triton."""
    if not mla:
        return "aiter"
    return "aiter" if kv_heads_per_gpu in AITER_MLA_HEADS else "triton"


def aiter_fraction_factor(
    release: Release | None, *, rocm: bool, attention_backend: str | None, context_len: int
) -> float:
    """What mem_fraction_static is multiplied by: 0.90 / 0.85 on ROCm with the aiter backend above 8192 tokens
    of context (`release` None: the current rules, 0.85), else 1."""
    if not rocm or attention_backend != "aiter" or context_len <= AITER_LONG_CONTEXT:
        return 1.0
    if release is None or release >= AITER_085:
        return 0.85
    return 0.90 if release >= AITER_FIRST else 1.0

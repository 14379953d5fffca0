"""vLLM's profile run: what it subtracts from util x total before the KV cache, per release (docs/reference/memory.md
§3 "Profile run, per version").

- V0 (the default engine before v0.8.0) and V1 measure the torch peak of one forward of max_num_batched_tokens
  tokens and one sampler warm-up of min(max_num_batched_tokens, max_num_seqs) rows (V1 gpu_model_runner.py
  profile_run: _dummy_run(max_num_tokens) then _dummy_sampler_run; V0 worker.py determine_num_available_blocks).
  The two run one after the other, so the peak is the larger of the two.
- Forward peak per token (bf16): one layer's MLP at its widest, gate_up [N, 2I/tp] + SiluAndMul [N, I/tp], beside
  the residual, the normed input and the layer output ([N, H] each); a MoE layer holds fused_moe's intermediate
  caches [N, k, 2I/tp], [N x k, I/tp] and [N, k, H] instead (fused_moe.py). V0's Llama-3.1-8B log checks it:
  17.06 - 14.99 = 2.07 GiB at 20,000 tokens, 2.99 at 29,000 (2 x (3 x 14336 + 3 x 4096) = 110,592 B/token).
- Sampler warm-up, bytes per logits element (rows x vocab): the dummy run asks top-k and top-p (V0's profile
  sequences; V1 since PR #13594), which the PyTorch path serves with a full-vocab sort: 40 B/element (PR #32558's measurement, 1.25 GiB for
  256 x 131072). The Triton top-k/top-p kernel (PR #33538, merged Feb 2026, first in v0.16.0) needs no sort:
  the bf16 logits and their fp32 copy remain, 6 B/element.
- CUDA graphs: captured after the KV cache is sized until v0.21.0; from v0.21.0 their memory is estimated and
  subtracted (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS).
- Defaults: V1 max_num_seqs 1024 / max_num_batched_tokens 8192 from 70 GiB, else 256 / 2048 (arg_utils.py,
  OpenAI server). V0: max_num_seqs 256; max_num_batched_tokens = max(max_model_len, 2048), or 512 with chunked
  prefill, which V0 turns on by default above 32K context (config.py SchedulerConfig, arg_utils.py).
"""

from __future__ import annotations

import re

from servelab.errors import ConfigError
from servelab.model.spec import ModelSpec

GIB = 1024**3
CURRENT_VERSION = "0.26.0"  # the newest release the rules were read for
V1_DEFAULT = (0, 8, 0)  # V1 became the default engine
TRITON_TOPK_TOPP = (0, 16, 0)  # PR #33538: top-k/top-p without a sort
GRAPHS_SUBTRACTED = (0, 21, 0)  # CUDA-graph memory estimated and subtracted
SORT_BYTES_PER_LOGIT = 40  # PyTorch sort-based top-k/top-p (PR #32558: 1.25 GiB for 256 x 131072)
NO_SORT_BYTES_PER_LOGIT = 2 + 4  # bf16 logits + their fp32 copy
BIG_GPU_BYTES = 70 * GIB
V0_CHUNKED_ABOVE = 32768  # V0 enables chunked prefill by default for longer contexts
V0_CHUNKED_BATCHED = 512


def parse_version(text: str | None) -> tuple[int, int, int]:
    """'0.10.1', 'v0.26.0', '0.15.2rc1.dev93+g11a4c9d30' -> (major, minor, patch); None -> the current release."""
    found = re.match(r"v?(\d+)\.(\d+)(?:\.(\d+))?", (text or CURRENT_VERSION).strip())
    if not found:
        raise ConfigError(f"vLLM version {text!r} is not a version number; pass one like 0.10.1")
    major, minor, patch = found.groups()
    return int(major), int(minor), int(patch or 0)


def default_batch(
    version: tuple[int, int, int], gpu_memory_bytes: int, max_model_len: int
) -> tuple[int, int]:
    """(max_num_seqs, max_num_batched_tokens) vLLM picks when neither is given."""
    if version < V1_DEFAULT:
        chunked = max_model_len > V0_CHUNKED_ABOVE
        return 256, V0_CHUNKED_BATCHED if chunked else max(max_model_len, 2048)
    return (1024, 8192) if gpu_memory_bytes >= BIG_GPU_BYTES else (256, 2048)


def forward_bytes_per_token(model: ModelSpec, tp: int) -> int:
    """The forward's torch peak per batched token (bf16), at the widest layer (dense MLP or fused MoE)."""
    hidden = 3 * model.hidden_size
    dense = 3 * model.intermediate_size // tp
    moe = 0
    if model.moe is not None:
        k, width = model.moe.experts_per_token, model.moe.expert_intermediate_size // tp
        moe = k * 3 * width + k * model.hidden_size
    return 2 * (hidden + max(dense, moe))


def sampler_bytes(model: ModelSpec, rows: int, version: tuple[int, int, int]) -> int:
    """The sampler warm-up's peak for `rows` dummy requests."""
    per_logit = SORT_BYTES_PER_LOGIT if version < TRITON_TOPK_TOPP else NO_SORT_BYTES_PER_LOGIT
    return rows * model.vocab_size * per_logit


def profile_peak_bytes(
    model: ModelSpec, batched: int, seqs: int, tp: int, version: tuple[int, int, int]
) -> int:
    """Torch peak of the profile run above the weights: the forward or the sampler warm-up, whichever is larger."""
    forward = batched * forward_bytes_per_token(model, tp)
    return max(forward, sampler_bytes(model, min(batched, seqs), version))


def graphs_in_budget(version: tuple[int, int, int]) -> bool:
    """Whether the CUDA-graph pool is taken out of the KV budget (v0.21.0 on) or captured after it."""
    return version >= GRAPHS_SUBTRACTED


MARLIN_HIDDEN_ALIGN = 256  # fused_moe layer.py: hidden_size rounded up for the Marlin MXFP4 backend
MARLIN_INTERMEDIATE_ALIGN = 128  # mxfp4.py create_weights: the expert intermediate rounded up for Marlin
TRITON_MXFP4_FROM = (0, 12, 0)  # H100 logs: Marlin at v0.10.1/v0.11.0, Triton's layout at v0.14.1


def _round_up(value: int, align: int) -> int:
    return -(-value // align) * align


def marlin_mxfp4(compute_capability: str | None, version: tuple[int, int, int]) -> bool:
    """Whether vLLM serves MXFP4 experts with the Marlin weight-only kernel: outside SM90-SM100 (the triton_kernels
    range of mxfp4.py get_mxfp4_backend), and on Hopper before triton_kernels shipped with vLLM."""
    if compute_capability is None:
        return False
    major, _, minor = compute_capability.partition(".")
    capability = (int(major), int(minor or 0))
    return not (9, 0) <= capability < (11, 0) or version < TRITON_MXFP4_FROM


def marlin_padding_bytes(model: ModelSpec, tp: int) -> int:
    """Bytes per GPU the Marlin layout adds to MXFP4 experts (4.25 bits a weight): hidden to a multiple of 256,
    the expert intermediate to a multiple of 128 (gpt-oss: 2880 -> 3072 x 2944, 9% more expert bytes)."""
    if model.moe is None or model.quant.lower() != "mxfp4":
        return 0
    moe = model.moe
    hidden, width = model.hidden_size, moe.expert_intermediate_size // tp
    padded = _round_up(hidden, MARLIN_HIDDEN_ALIGN) * _round_up(width, MARLIN_INTERMEDIATE_ALIGN)
    extra_params = 3 * (padded - hidden * width) * moe.num_experts * moe.num_moe_layers
    return extra_params * 17 // 32  # 4.25 bits: 16 B of nibbles + 1 B of scale per 32 weights

"""vLLM's profile run: what it subtracts from util x total before the KV cache, per release (docs/reference/memory.md
§3 "Profile run, per version").

- V0 (the default engine before v0.8.0) and V1 measure the torch peak of one forward of max_num_batched_tokens
  tokens and one sampler warm-up of min(max_num_batched_tokens, max_num_seqs) rows (V1 gpu_model_runner.py
  profile_run: _dummy_run(max_num_tokens) then _dummy_sampler_run; V0 worker.py determine_num_available_blocks).
  The two run one after the other, so the peak is the larger of the two; the forward's hidden states [N, H] stay
  alive through the sampler warm-up (profile_run deletes them after it).
- Forward peak per token (bf16): one layer's MLP at its widest, gate_up [N, 2I/tp] + SiluAndMul [N, I/tp], beside
  the residual, the normed input and the layer output ([N, H] each); a MoE layer holds fused_moe's intermediate
  caches instead (fused_moe.py fused_experts_impl, v0.9.2-v0.26.0): cache13 [N x k x max(2I/tp, H)], which the
  gate_up output and the down output share, and cache2 [N x k, I/tp]. V0's Llama-3.1-8B log checks it:
  17.06 - 14.99 = 2.07 GiB at 20,000 tokens, 2.99 at 29,000 (2 x (3 x 14336 + 3 x 4096) = 110,592 B/token).
- Sampler warm-up, bytes per logits element (rows x vocab): the dummy run asks top-k and top-p (V0's profile
  sequences; V1 since PR #13594), which the PyTorch path serves with a full-vocab sort: 40 B/element (PR #32558's
  measurement, 1.25 GiB for 256 x 131072). The Triton top-k/top-p kernel (PR #33538, merged Feb 2026, first in
  v0.16.0) masks in place; what stays alive at the peak (v0.19.0-v0.26.0 sampler.py Sampler.forward,
  topk_topp_sampler.py forward_native / random_sample) is the logits in the model dtype (2 B), their fp32 copy
  (4 B), the fp32 softmax (4 B) and the fp32 exponential noise it is divided by in place (4 B): 14 B/element.
- CUDA graphs: captured after the KV cache is sized until v0.20.0; from v0.20.0 their memory is estimated and
  subtracted (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS defaults to 1 in the v0.20.0 wheel's envs.py, though the
  log line says "default since v0.21.0"), except where Model Runner V2 runs: its `profile_cudagraph_memory` is a
  stub returning 0 (v0.22.0-v0.27.1 `v1/worker/gpu/model_runner.py`), so nothing is subtracted and the graphs are
  captured after the KV cache is sized, as before v0.20 (`model_runner_v2`).
- Defaults (engine/arg_utils.py _set_default_args_v1 at v0.9.2, get_batch_defaults at v0.26.0): V1 max_num_seqs
  1024 / max_num_batched_tokens 8192 from 70 GiB on a card whose name does not say A100 ("Setting large
  max_num_batched_tokens for A100 reduces throughput", PR #17885), else 256 / 2048 (OpenAI server). V0:
  max_num_seqs 256; max_num_batched_tokens = max(max_model_len, 2048), or 512 with chunked prefill, which V0 turns
  on by default above 32K context (config.py SchedulerConfig, arg_utils.py).
"""

from __future__ import annotations

import re

from servelab.errors import ConfigError
from servelab.model.spec import LayerKind, ModelSpec

GIB = 1024**3
CURRENT_VERSION = "0.26.0"  # the newest release the rules were read for
V1_DEFAULT = (0, 8, 0)  # V1 became the default engine
TRITON_TOPK_TOPP = (0, 16, 0)  # PR #33538: top-k/top-p without a sort
GRAPHS_SUBTRACTED = (0, 20, 0)  # CUDA-graph memory estimated and subtracted (envs.py default 1 from v0.20.0)
MAMBA_GRAPH_CAP = (0, 18, 0)  # capture sizes capped to the Mamba blocks, with a warning (vllm#34094)
MAMBA_SEQS_REFUSED = (0, 20, 0)  # max_num_seqs above the Mamba blocks refused when full CUDA graphs are on
SORT_BYTES_PER_LOGIT = 40  # PyTorch sort-based top-k/top-p (PR #32558: 1.25 GiB for 256 x 131072)
NO_SORT_BYTES_PER_LOGIT = 2 + 4 + 4 + 4  # bf16 logits, their fp32 copy, fp32 softmax, fp32 exponential noise
BIG_GPU_BYTES = 70 * GIB
UNQUANTIZED = ("bf16", "fp16", "f16", "fp32", "f32")  # model_config.is_quantized is False
# Cards whose NVML memory query is not supported: a GB10 (DGX Spark) has no framebuffer of its own, so
# nvmlDeviceGetMemoryInfo raises NotSupported; vLLM reads the device total through NVML
# (platforms/cuda.py get_device_total_memory) and get_batch_defaults catches the error with device_memory = 0,
# so the small defaults whatever the card holds (docs/reference/memory.md, Defaults).
NVML_WITHOUT_MEMORY = ("gb10",)
V0_CHUNKED_ABOVE = 32768  # V0 enables chunked prefill by default for longer contexts
V0_CHUNKED_BATCHED = 512
# Tokens of the largest image a Qwen2.5-VL .. Qwen3.6 processor makes at its default size: 16,777,216 pixels at
# 32 x 32 per token (Qwen3: patch 16, merge 2), 12,845,056 at 28 x 28 (Qwen2.5); vllm issue 20123, PR 41723
QWEN_VL_MAX_IMAGE_TOKENS = 16384


def parse_version(text: str | None) -> tuple[int, int, int]:
    """'0.10.1', 'v0.26.0', '0.15.2rc1.dev93+g11a4c9d30' -> (major, minor, patch); None -> the current release."""
    found = re.match(r"v?(\d+)\.(\d+)(?:\.(\d+))?", (text or CURRENT_VERSION).strip())
    if not found:
        raise ConfigError(f"vLLM version {text!r} is not a version number; pass one like 0.10.1")
    major, minor, patch = found.groups()
    return int(major), int(minor), int(patch or 0)


def engine_v1(version: tuple[int, int, int], use_v1: bool | None = None) -> bool:
    """Whether the V1 engine runs: `use_v1` as VLLM_USE_V1 says it (0.7.x: off unless VLLM_USE_V1=1; 0.8.0 on:
    on unless VLLM_USE_V1=0, while V0 still exists), None for the release's default."""
    return version >= V1_DEFAULT if use_v1 is None else use_v1


def default_batch(
    version: tuple[int, int, int],
    gpu_memory_bytes: int,
    max_model_len: int,
    device_name: str = "",
    use_v1: bool | None = None,
) -> tuple[int, int]:
    """(max_num_seqs, max_num_batched_tokens) vLLM picks when neither is given; `device_name` is the card's name
    (an A100 keeps the small defaults whatever its memory, and so does a card whose NVML reports no memory, a
    GB10: NVML_WITHOUT_MEMORY). V1 opted into on 0.7.x (v0.7.3 engine/arg_utils.py:
    max_num_seqs "256 if not envs.VLLM_USE_V1 else 1024", `_override_v1_engine_args`: 8192 batched tokens for
    the OpenAI server when the device name says H100 or H200, else 2048)."""
    if not engine_v1(version, use_v1):
        chunked = max_model_len > V0_CHUNKED_ABOVE
        return 256, V0_CHUNKED_BATCHED if chunked else max(max_model_len, 2048)
    if version < V1_DEFAULT:
        name = device_name.lower()
        return 1024, 8192 if "h100" in name or "h200" in name else 2048
    name = device_name.lower()
    if any(card in name for card in NVML_WITHOUT_MEMORY):
        return 256, 2048  # the device memory vLLM reads is 0
    big = gpu_memory_bytes >= BIG_GPU_BYTES and "a100" not in name
    return (1024, 8192) if big else (256, 2048)


def forward_bytes_per_token(model: ModelSpec, tp: int) -> int:
    """The forward's torch peak per batched token (bf16), at the widest layer (dense MLP or fused MoE)."""
    hidden = 3 * model.hidden_size
    dense = 3 * model.intermediate_size // tp
    moe = 0
    if model.moe is not None:
        k, width = model.moe.experts_per_token, model.moe.expert_intermediate_size // tp
        moe = k * max(2 * width, model.hidden_size) + k * width  # cache13 (shared) + cache2
    return 2 * (hidden + max(dense, moe))


def sampler_bytes(model: ModelSpec, rows: int, version: tuple[int, int, int]) -> int:
    """The sampler warm-up's peak for `rows` dummy requests."""
    per_logit = SORT_BYTES_PER_LOGIT if version < TRITON_TOPK_TOPP else NO_SORT_BYTES_PER_LOGIT
    return rows * model.vocab_size * per_logit


def encoder_items(tokens_per_item: int, batched: int, seqs: int, max_model_len: int) -> int:
    """Dummy items the encoder profile runs at once (MultiModalBudget._get_max_items): the encoder budget
    max(max_num_batched_tokens, tokens per item) over the item's tokens, capped by max_num_seqs x the items one
    prompt can hold (chunked prefill, always on in V1, lifts the max_num_batched_tokens cap); at least one."""
    budget = max(batched, tokens_per_item)
    per_prompt = max(1, max_model_len // tokens_per_item)
    return max(1, min(budget // tokens_per_item, seqs * per_prompt))


def encoder_profile(
    model: ModelSpec, batched: int, seqs: int, tp: int, max_model_len: int
) -> tuple[int, int]:
    """(torch peak of the vision encoder's dummy run, bytes of the outputs it leaves in the encoder cache) on
    one GPU, for a dynamic-resolution Qwen-VL tower (docs/reference/memory.md §3 "The multimodal encoder's
    profile"); (0, 0) for a text-only model or a tower servelab does not model (fixed resolution).

    The tower sees items x QWEN_VL_MAX_IMAGE_TOKENS x merge^2 patch tokens. Alive at its widest point, a block's
    MLP: the pixel_values the caller holds [N, channels x temporal x patch^2], the residual stream and the
    normed block input [N, width] each, and the MLP's fc1 output beside its activation [N, intermediate/tp]
    each (the attention half, qkv [N, 3 x width/tp] and the rotated q and k, is narrower for these towers).
    All bf16. The outputs, items x tokens x the LLM hidden (x 1 + deepstack levels), stay cached through the
    text forward and the sampler warm-up."""
    vision = model.vision
    if vision is None or vision.merge < 2:
        return 0, 0
    tokens = QWEN_VL_MAX_IMAGE_TOKENS
    items = encoder_items(tokens, batched, seqs, max_model_len)
    n = items * tokens * vision.merge * vision.merge
    widths = vision.width + vision.width  # residual + normed input
    mlp = 2 * -(-vision.intermediate // tp)
    attention = 5 * -(-vision.width // tp)
    peak = 2 * n * (vision.patch_values + widths + max(mlp, attention))
    outputs = 2 * items * tokens * (vision.out_hidden or model.hidden_size) * (1 + vision.deepstack)
    return peak, outputs


def profile_peak_bytes(
    model: ModelSpec,
    batched: int,
    seqs: int,
    tp: int,
    version: tuple[int, int, int],
    *,
    max_model_len: int = 0,
    multimodal: bool = True,
    use_v1: bool | None = None,
) -> int:
    """Torch peak of the profile run above the weights: the vision encoder's dummy run (V1, multimodal models,
    unless --language-model-only), then, beside its cached outputs, the forward or the sampler warm-up beside
    the forward's hidden states, whichever is larger. V1 opted into on 0.7.x has no sampler warm-up (v0.7.3
    v1/worker/gpu_model_runner.py `profile_run`: the forward, then the logits of one row per request, bf16)."""
    forward = batched * forward_bytes_per_token(model, tp)
    hidden_states = batched * model.hidden_size * 2
    v1 = engine_v1(version, use_v1)
    if v1 and version < V1_DEFAULT:
        return max(forward, hidden_states + min(batched, seqs) * model.vocab_size * 2)
    text = max(forward, hidden_states + sampler_bytes(model, min(batched, seqs), version))
    if not multimodal or not v1:
        return text
    encoder, outputs = encoder_profile(model, batched, seqs, tp, max_model_len or model.max_context)
    return max(encoder, outputs + text)


def graphs_in_budget(version: tuple[int, int, int], runner_v2: bool = False) -> bool:
    """Whether the CUDA-graph estimate is taken out of the KV budget (v0.20.0 on, under the V1 model runner) or
    the graphs are captured after the budget is sized (before v0.20, and under Model Runner V2, whose estimate is
    0)."""
    return version >= GRAPHS_SUBTRACTED and not runner_v2


# Model Runner V2 by default (`VllmConfig.use_v2_model_runner` / `_is_default_v2_model_runner_model`, vllm/config/
# vllm.py, read in the v0.21.0-v0.27.1 wheels, v0.23.0 included; none before v0.22.0). The HF architectures its
# default list names, by servelab's model_type (ModelSpec.architecture), from the release that lists them; from
# V2_RUNNER_ANY_DENSE also every model that is neither hybrid, attention-free nor MoE.
V2_RUNNER_FROM = (0, 22, 0)
V2_RUNNER_ANY_DENSE = (0, 25, 0)
V2_ARCHITECTURES: tuple[tuple[tuple[int, int, int], frozenset[str]], ...] = (
    ((0, 22, 0), frozenset({"qwen3"})),  # v0.22.0 vllm.py 69: Qwen3ForCausalLM (dense, unquantized only)
    ((0, 23, 0), frozenset({"qwen3", "llama", "mistral"})),  # v0.23.0 vllm.py: dense, unquantized only
    (  # v0.24.0 vllm.py 68-77
        (0, 24, 0),
        frozenset({"qwen3", "deepseek_v2", "qwen2_moe", "granitemoe", "llama", "mistral"}),
    ),
    ((0, 25, 0), frozenset({"deepseek_v2", "qwen2_moe", "granitemoe"})),  # v0.25.0 vllm.py 68-74
)
# servelab's speculative methods V2 runs (vLLM's eagle/eagle3/mtp; not ngram, nor a draft model)
V2_SPECULATIVE = frozenset({"mtp", "eagle"})


def model_runner_v2(
    model: ModelSpec, version: tuple[int, int, int], speculative_method: str | None = None
) -> bool:
    """Whether vLLM runs the launch on Model Runner V2 (VLLM_USE_V2_MODEL_RUNNER unset): an architecture of the
    release's default list (v0.22.0: Qwen3, v0.23.0: + Llama, Mistral, dense and unquantized only; v0.24.0:
    six architectures, quantized and MoE too), from v0.25.0 also any model that is neither hybrid,
    attention-free nor MoE; and no feature V2 lacks that a plan can name
    (`_get_v2_model_runner_unsupported_features`: ngram and draft-model speculation; hybrids on v0.22.x)."""
    if version < V2_RUNNER_FROM:
        return False
    if speculative_method is not None and speculative_method not in V2_SPECULATIVE:
        return False
    recurrent = model.count(LayerKind.LINEAR_ATTENTION) + model.count(LayerKind.MAMBA)
    attention_free = recurrent == model.num_layers
    listed = next(archs for since, archs in reversed(V2_ARCHITECTURES) if version >= since)
    if version < V2_RUNNER_ANY_DENSE:
        quantized = model.quant.lower() not in UNQUANTIZED
        if version < (0, 24, 0) and (model.moe is not None or quantized or recurrent):
            return False
        return model.architecture in listed
    if recurrent or attention_free:
        return False
    return model.architecture in listed or model.moe is None


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


def full_cuda_graphs(enforce_eager: bool, cudagraph_mode: str | None) -> bool:
    """Whether the launch captures full CUDA graphs: V1's default mode (FULL_AND_PIECEWISE) does, --enforce-eager
    (mode NONE) does not, nor does an explicit cudagraph_mode without FULL (PIECEWISE, NONE)."""
    if enforce_eager:
        return False
    return cudagraph_mode is None or "FULL" in cudagraph_mode.upper()


def mamba_seqs_rule(version: tuple[int, int, int], full_graphs: bool) -> str:
    """What a hybrid launch with max_num_seqs above its Mamba blocks meets (config/compilation.py, read in the
    v0.11.0-v0.27.1 wheels): 'refused' from v0.20.0 with full CUDA graphs (`has_full_cudagraphs()`, the
    ValueError "max_num_seqs (N) exceeds available Mamba cache blocks (B)"); 'capped' in v0.18.0-v0.19.x, where
    `adjust_cudagraph_sizes_for_mamba_cache` lowers the capture sizes to the blocks with a warning and starts;
    'none' otherwise (eager or piecewise-only launches, older releases)."""
    if not full_graphs:
        return "none"
    if version >= MAMBA_SEQS_REFUSED:
        return "refused"
    return "capped" if version >= MAMBA_GRAPH_CAP else "none"

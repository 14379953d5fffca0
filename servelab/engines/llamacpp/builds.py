"""llama.cpp builds: the number `plan --engine-version` takes, and the rules that depend on it.

llama.cpp numbers its builds by commit (`build: 8354 (d23355af)` in the log, release tag b8354). Rules that
changed (docs/reference/memory.md §4 "Outputs of the reserved graph, by build"):
- the compute buffer's worst-case graph: before b9460 (ggml-org/llama.cpp PR #23861 "llama: limit max outputs of
  `llama_context`", commit de6f727aa, 2026-06-01) `graph_reserve(n_tokens, n_seqs, n_tokens)`, every token of the
  ubatch an output (so the f32 logits of the whole ubatch are in the buffer); from b9460
  `graph_reserve(n_tokens, n_seqs, min(n_tokens, n_outputs_max))`, llama-server's n_outputs_max = n_parallel.
- the flash-attention KQ mask: before b9410 (PR #23764 "llama: use f16 mask for FA to save VRAM", commit
  031ddb2e0, 2026-05-29) the graph reserves the mask in f32 and casts it to f16 for the backends, so both sit in the
  compute buffer; from b9410 the mask is built in f16.
- -ngl N: from PR #18148 ("llama: offload output layer to GPU first", merged 2025-12-18) N counts the output layer,
  offloaded first, then the last N - 1 repeating layers (memory.py `gpu_layers`); before, the last N repeating
  layers and the output layer only when N > n_layer. The first build with it lies between b7441 (2025-12-17) and
  b7472 (2025-12-18); servelab takes b7470, the first release dated the merge day in the upstream release
  changelog (b7470 and b7472 are its 2025-12-18 entries), so a build in b7441-b7469 may be misread.
"""

from __future__ import annotations

import re

from servelab.errors import ConfigError

OUTPUTS_MAX_BUILD = 9460  # first build whose reserved graph has min(n_tokens, n_outputs_max) outputs
F16_MASK_BUILD = 9410  # first build that reserves the flash-attention KQ mask in f16 only (no f32 original)
OUTPUT_FIRST_BUILD = 7470  # first build (taken) whose -ngl counts the output layer and offloads it first
# release tags b1000 on (2023); smaller numbers are a shallow clone's commit count
FIRST_NUMBERED_BUILD = 1000

_BUILD = re.compile(r"b?(\d+)(?=$|[\s(-])", re.IGNORECASE)


def parse_build(text: str | None) -> int | None:
    """'b8354', '8354', '5466 (9ecf3e66)' -> the build number; None -> None (the current build)."""
    if text is None:
        return None
    found = _BUILD.match(text.strip())
    if not found:
        raise ConfigError(
            f"llama.cpp build {text!r} is not a build number; pass one like b8354 (the log's `build:`)"
        )
    build = int(found.group(1))
    if build < FIRST_NUMBERED_BUILD:
        raise ConfigError(
            f"llama.cpp build {build} is a shallow clone's commit count, not a release; pass the release tag"
            " (bNNNN) the source was taken from, or no --engine-version for the current rules"
        )
    return build


def reserved_outputs(build: int | None, n_batch: int) -> int | None:
    """The n_outputs_max the worst-case graph is reserved with: None for current builds (llama-server's
    n_parallel), n_batch (so every token of the ubatch) before b9460."""
    if build is None or build >= OUTPUTS_MAX_BUILD:
        return None
    return n_batch


def fa_mask_keeps_f32(build: int | None) -> bool:
    """Whether a flash-attention graph also holds the f32 KQ mask it casts to f16 (builds before b9410)."""
    return build is not None and build < F16_MASK_BUILD


def output_layer_first(build: int | None) -> bool:
    """Whether -ngl counts the output layer and offloads it first (current builds; from b7470)."""
    return build is None or build >= OUTPUT_FIRST_BUILD

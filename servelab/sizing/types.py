"""The planner's result types. `PlanSet` is what `servelab plan --json` prints; `Plan.from_json` reads one
complete entry back (`plan.saved` has the partial form the readers of plan files use)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from servelab.sizing.parallel import TensorParallelCost
from servelab.sizing.typed_json import from_json


@dataclass(frozen=True, kw_only=True)
class MemoryBytes:
    """Per-GPU memory by component, in bytes. `total` is what the engine would hold; `capacity` the card."""

    weights: int
    kv_cache: int
    recurrent_state: int
    activations: int  # activation peak / compute buffers / CUDA graphs / the engine's reserve
    runtime: int  # CUDA context and other non-engine allocations
    total: int
    capacity: int
    weights_text: int = 0  # body + embedding + lm_head
    weights_vision: int = 0
    weights_mtp: int = 0
    host_bytes: int = 0  # what stays in host RAM (llama.cpp partial offload, output buffer)


@dataclass(frozen=True)
class DecodeCeilings:
    """Single-sequence decode tok/s at a short context and at the planned context."""

    short: float
    full_context: float
    short_context: int
    bound: str = "memory"


@dataclass(frozen=True)
class BatchPoint:
    batch: int
    context: int
    aggregate_tok_s: float
    per_sequence_tok_s: float
    expected_aggregate_tok_s: float = (
        0.0  # at the engine's efficiency for this batch (plan.efficiency_source)
    )


@dataclass(frozen=True)
class PricedSpeeds:
    """Where a plan's expected speeds came from and how far they may be off (docs/predict.md "Bands and
    provenance"). `source`: `plan` (the engine's sourced efficiencies: the figures as planned), `corpus` (the GPU
    step model fitted to the public corpus) or `calibration` (this machine's profile); with the last two the
    expected figures are the step model's (`predict/speeds.py`), the same `servelab predict` prices steps with.
    `bands`: (low, high) tok/s of an expected figure, keyed `decode_short`, `decode_full`, `prefill_short`,
    `batch_short:B`, `batch_full:B` (absent: no band; only the corpus fit has been cross-validated)."""

    source: str = "plan"
    detail: str = ""
    stale: str | None = None  # a calibration profile measured on another release than the one planned: why
    prefill_short_tok_s: float | None = None  # expected prefill of a short prompt (None: not priced)
    bands: dict[str, tuple[float, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class PlannedCard:
    """The figures of the card a plan was made for, as planned (its --vram/--bandwidth/--tflops applied), so that
    `predict --plan` prices the same card and not the catalog entry of its name."""

    memory_mib: int
    bandwidth_gb_s: float
    bf16_tflops: float


@dataclass(frozen=True, kw_only=True)
class Plan:
    engine: str
    quant: str
    context: int  # the longest request the plan serves, as asked
    kv_dtype: str  # the engine's own spelling
    fits: bool
    memory_bytes: MemoryBytes
    decode_ceiling_tok_s: DecodeCeilings  # physical ceiling (100% of bandwidth)
    decode_expected_tok_s: DecodeCeilings  # the ceiling's bytes at the engine's efficiency (format x batch)
    prefill_ceiling_tok_s: float
    tensor_parallel: int
    native_quant: bool = False  # the checkpoint's own quantization (not re-quantised by the plan)
    model: str = ""
    gpu: str = ""
    slots: int = 1
    context_served: int = 0  # the longest request the engine would accept with these settings
    prefill_bound: str = "compute"
    prefill_short_tok_s: float = (
        0.0  # prefill ceiling for a short prompt (decode_ceiling_tok_s.short_context)
    )
    efficiency: dict[str, float] = field(default_factory=dict)  # decode (weights), decode_kv, prefill
    efficiency_source: str = ""  # which decode figure the plan used and why (its table cell and source)
    decode_batch_tok_s: tuple[BatchPoint, ...] = ()  # at decode_ceiling_tok_s.short_context
    decode_batch_full_context_tok_s: tuple[BatchPoint, ...] = ()  # at the served context
    parallel_cost: TensorParallelCost | None = None
    single_gpu_decode_tok_s: float | None = None  # for comparison when tensor_parallel > 1
    details: dict[str, object] = field(default_factory=dict)  # engine-specific figures
    command: tuple[str, ...] = ()
    command_line: str = ""
    warnings: tuple[str, ...] = ()  # the refusals first, then what the engine does silently
    refusals: tuple[str, ...] = ()  # why the engine would refuse these settings (any: fits is false)
    remedy: dict[str, object] = field(default_factory=dict)  # settings the refusals name as the fix
    searched: tuple[
        str, ...
    ] = ()  # what the search changed from the asked settings, as `setting=value` words
    # the launch as asked (the engine's defaults for what is not given) does not fit: the engine's flags to add that
    # make it fit, in its own spelling (empty: it fits as asked, or no KV dtype or engine knob makes it fit)
    fits_with: tuple[str, ...] = ()
    card: PlannedCard | None = None  # None: a plan saved before plans recorded their card
    device_note: str = ""  # the CPU device: its measured bandwidth (when) and how its peak was estimated
    speeds: PricedSpeeds = field(default_factory=PricedSpeeds)  # where the expected speeds came from, bands

    @classmethod
    def from_json(cls, data: Mapping[str, object], where: str = "plan") -> Plan:
        """A complete entry of `servelab plan --json` (every field without a default, nested values typed);
        a missing field or a wrong type is a one-line ConfigError naming it (`where` prefixes the name)."""
        return from_json(cls, data, where)


@dataclass(frozen=True)
class PlanSet:
    model: str
    gpu: str
    gpus: int
    interconnect: str | None
    plans: tuple[Plan, ...]
    # True: a comparison, each entry its engine x format's best fitting variant (`compare_plans`); False: the
    # launch as asked (`plan_as_asked`, --cmd/--compose)
    search: bool = False

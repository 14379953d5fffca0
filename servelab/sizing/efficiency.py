"""Decode efficiency: the fraction of the bandwidth roofline an engine's kernels reach, by weight format family
and batch. Each engine keeps its table as data (servelab/engines/<e>/efficiency.py); every figure is a public
measurement, derived as measured tok/s x bytes read per token / bandwidth (docs/planning.md "Decode
efficiency"), or the engine's default where none was found (the table says so).

The weight figure applies to the weight bytes of a step; KV-cache and recurrent-state reads run at the table's
16-bit figure (attention kernels unpack no weights), so a format whose unpacking is slow at small batch (the
field report's 1.75-bit ternary model) is slow at short context and catches up at long context, where KV reads
dominate.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from servelab.hardware.gpus import GPU, find_gpu
from servelab.model.dtypes import storage_dtype
from servelab.model.load import load_model
from servelab.sizing.kv import kv_layout
from servelab.sizing.speed import decode_ceiling
from servelab.sizing.state import state_layout

KV_FAMILY = "16-bit"  # the family whose figure KV and state reads run at


@dataclass(frozen=True, kw_only=True)
class DecodeMeasurement:
    """A public decode measurement: `tok_s` per sequence of `model` in `quant` on `gpu` at `batch` sequences,
    `context` tokens in the KV cache on average. `bytes_per_token`: by hand (the note says how) when the
    catalog lacks the model; else the planner's own decode step bytes (benchmarks/plan_efficiency.py)."""

    tok_s: float
    gpu: str  # a catalog name (its bandwidth is the roofline's)
    model: str  # a catalog id, or the model's name when bytes_per_token is given
    quant: str
    url: str
    context: int = 0
    kv_dtype: str = "f16"
    bytes_per_token: float | None = None  # per sequence per step, by hand; None: the planner's


@dataclass(frozen=True)
class EfficiencyCell:
    family: str  # servelab.model.quant.decode_family
    batch: int  # sequences decoded together; the cell holds from this batch up to the next tabulated one
    decode: float
    # None: derived from other cells or a qualitative source (the note says)
    measurement: DecodeMeasurement | None
    note: str = ""


@dataclass(frozen=True)
class EfficiencyTable:
    engine: str  # the label the plan's note uses: "llama.cpp"
    default: float  # for a format x batch no public measurement covers
    default_note: str
    cells: tuple[EfficiencyCell, ...]
    # the GPU step model (servelab/predict/stepmodel.py): the math units the engine's matmul kernels run on for
    # a weight family on a backend and card ("bf16", "fp16", "int8", "fp8", "fp4"), and the flags that turn its
    # CUDA graphs off (eager: every kernel launched from the host)
    math_unit: Callable[[str, str, GPU], str] | None = None
    eager_flags: tuple[str, ...] = ()


@dataclass(frozen=True)
class DecodeEfficiency:
    weights: float  # the share of bandwidth reading the weights reaches
    kv: float  # the same for KV-cache and recurrent-state reads
    family: str
    batch: int  # the tabulated batch used (0: the default)
    sourced: bool  # False: the engine's default (no measurement for this cell)
    note: str  # what was used and why, for the plan's output


def _cell(table: EfficiencyTable, family: str, batch: int) -> EfficiencyCell | None:
    """The cell of `family` at the largest tabulated batch <= `batch` (the smallest when all are larger)."""
    cells = sorted((c for c in table.cells if c.family == family), key=lambda c: c.batch)
    if not cells:
        return None
    below = [c for c in cells if c.batch <= batch]
    return below[-1] if below else cells[0]


def _source(cell: EfficiencyCell) -> str:
    return cell.measurement.url if cell.measurement else cell.note


def decode_efficiency(table: EfficiencyTable, family: str, batch: int = 1) -> DecodeEfficiency:
    """What `table` says for weights of `family` decoded `batch` at a time, and for the KV reads beside them."""
    kv_cell = _cell(table, KV_FAMILY, batch)
    kv = kv_cell.decode if kv_cell else table.default
    cell = _cell(table, family, batch)
    if cell is None:
        note = (
            f"{table.engine} {family} at batch {batch}: no public measurement, the engine's default"
            f" {table.default:.2f} ({table.default_note})"
        )
        return DecodeEfficiency(table.default, kv, family, 0, False, note)
    note = f"{table.engine} {family} at batch {cell.batch}: {cell.decode:.2f} ({_source(cell)})"
    if family != KV_FAMILY:
        kv_source = _source(kv_cell) if kv_cell else table.default_note
        note += f"; KV and state reads at the 16-bit figure {kv:.2f} ({kv_source})"
    return DecodeEfficiency(cell.decode, kv, family, cell.batch, True, note)


def uniform(decode: float, family: str, note: str) -> DecodeEfficiency:
    """One figure for every read (the CPU device: docs/planning.md "The CPU as a device")."""
    return DecodeEfficiency(decode, decode, family, 1, True, note)


def step_bytes(m: DecodeMeasurement, batch: int, state_dtypes: tuple[str | None, str | None]) -> float:
    """Bytes one decode step of the measured setup reads: the hand figure x batch, or the planner's own (weights
    read by `batch` sequences + their KV at `context` + recurrent state read and written)."""
    if m.bytes_per_token is not None:
        return m.bytes_per_token * batch
    model = load_model(m.model, quant=m.quant)
    state = state_layout(model, conv_dtype=state_dtypes[0], ssm_dtype=state_dtypes[1]).bytes_per_sequence
    kv = kv_layout(model, storage_dtype(m.kv_dtype, model.dtype))
    gpu = find_gpu(m.gpu)
    return decode_ceiling(model, gpu, kv, state_bytes=state, context=m.context, batch=batch).step_bytes


def measured_efficiency(cell: EfficiencyCell, state_dtypes: tuple[str | None, str | None]) -> float:
    """measured tok/s x bytes read per step / bandwidth: the share of the roofline the cell's measurement
    reached (docs/planning.md "Decode efficiency"); ValueError for a cell without a measurement."""
    m = cell.measurement
    if m is None:
        raise ValueError(f"{cell.family} at batch {cell.batch} has no measurement")
    return m.tok_s * step_bytes(m, cell.batch, state_dtypes) / find_gpu(m.gpu).bandwidth_bytes_s


def hf_math_unit(family: str, backend: str, gpu: GPU) -> str:
    """The math units an engine serving Hugging Face formats (vLLM, sglang) multiplies on: FP8 and FP4 weights on
    the card's FP8 / FP4 tensor cores where it has them, else the weight-only kernels (Marlin: dequantised to
    16-bit, https://github.com/IST-DASLab/marlin); AWQ / GPTQ / int formats the same 16-bit path; 16-bit weights
    at BF16."""
    if family == "fp8" and gpu.fp8_tflops:
        return "fp8"
    if family == "fp4":
        return "fp4" if gpu.fp4_tflops else "fp8" if gpu.fp8_tflops else "fp16"
    return "bf16" if family in ("16-bit", "unknown") else "fp16"

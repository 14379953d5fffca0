"""The GPU step model: the roofline's step priced with physical parameters fitted to the public corpus.

One forward pass of an engine on a GPU (docs/predict.md "The GPU step model"):

    memory  = weight bytes / peak bandwidth x (w[engine, kernel family] + m[engine, memory class])
              + KV and state bytes / peak bandwidth x kv[engine]
    compute = prompt matmul FLOPs / peak of its math units x (c[engine, unit] + b[engine, backend])
              + decode matmul FLOPs / peak of its math units x d[engine, backend]
              + attention FLOPs / peak 16-bit x a[engine]
    pass    = max(memory, compute) + layers x launch[engine, graphs or eager]
    step    = Σ passes + all-reduces x r[engine] + host[engine] + per-token[engine] x tokens

Every parameter multiplies a quantity the roofline already computes (bytes, FLOPs, layers, tokens, the
interconnect model's all-reduce time), so with each pass on one side of its max a step's time is linear in the
parameters: `fit_corpus` (predict/corpus/fit.py) solves for them by bounded least squares over replayed steps,
as `calibrate` does for one machine. Inverse efficiencies are sums (a kernel family's unpacking overhead on top
of what the memory class streams; a unit's kernel overhead on top of the backend's), each term >= 0.

Every parameter is the engine's own, the memory class and the backend too: what a memory class streams and what
a backend's matmuls reach is what *this engine's kernels* get from them (llama.cpp's MMVQ/MMQ and Metal kernels,
vLLM's and sglang's cuBLAS, CUTLASS and Marlin paths), and the all-reduce scale is its own custom or NCCL
all-reduce against the interconnect model. One engine's rows (1,039 llama-bench figures against 625 serving ones)
then never move another engine's prices, and each engine's fit is its own: its prior pull chosen and its fit
kept or left at the priors by cross-validation (docs/predict.md "The fit").

A parameter the fit never saw keeps its prior: the engine's sourced decode table (plan/efficiency.py) and
prefill figure, the memory class and backend at their peak, the overheads at 0, the all-reduce as modelled.
The fitted values ship as data (`stepmodel.json` beside this file), with the corpus files and residuals they came
from; `load_step_model()` reads them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from servelab.engines import registry
from servelab.errors import ConfigError
from servelab.hardware.gpus import GPU
from servelab.model.quant import decode_family
from servelab.predict.roofline import AchievedRates
from servelab.sizing.efficiency import KV_FAMILY, EfficiencyTable, decode_efficiency

FIT_FILE = "stepmodel.json"
# a step model file to use instead of the shipped one (tests, a fit of one's own: docs/predict.md)
STEP_MODEL_ENV = "SERVELAB_STEP_MODEL"
# prior scales of the parameters whose prior is 0 (the regularisation's unit; docs/predict.md)
LAUNCH_SCALE_S = 5e-6  # per layer per pass (a few kernels of ~1-5 us each)
HOST_SCALE_S = 1e-3  # per step (scheduling, sampling, the step's Python)
TOKEN_SCALE_S = 1e-5  # per token in a step
ATTENTION_UNIT = "fp16"  # attention kernels (FlashAttention and the engines' own) multiply in 16 bits


@dataclass(frozen=True)
class Regime:
    """What selects a pass's parameters: the engine (registry name), the weights' kernel family, the card's
    memory class and backend, the math units its matmuls use, CUDA graphs on or off."""

    engine: str
    family: str
    memory: str  # gddr, hbm, apple, amd (predict/corpus/load.py gpu_class)
    backend: str  # cuda, rocm, metal, vulkan …
    unit: str  # bf16, fp16, int8, fp8, fp4
    eager: bool = False

    def names(self) -> dict[str, str]:
        """role -> parameter name."""
        e = self.engine
        return {
            "weights": f"{e}.weights.{self.family}",
            "memory": f"{e}.memory.{self.memory}",
            "kv": f"{e}.kv",
            "compute": f"{e}.compute.{self.unit}",
            "backend": f"{e}.backend.{self.backend}",
            "decode": f"{e}.decode.{self.backend}",
            "attention": f"{e}.attention",
            "launch": f"{e}.launch.{'eager' if self.eager else 'graphs'}",
            "host": f"{e}.host",
            "token": f"{e}.token",
            "allreduce": f"{e}.allreduce",
        }


def backend_for(gpu: GPU) -> str:
    """The backend a card runs an engine on when the source does not say: Metal on Apple, ROCm on AMD, CUDA."""
    from servelab.predict.corpus.load import gpu_class

    return {"apple": "metal", "amd": "rocm"}.get(gpu_class(gpu), "cuda")


def regime(engine: str, gpu: GPU, quant: str, *, backend: str | None = None, eager: bool = False) -> Regime:
    from servelab.predict.corpus.load import gpu_class

    name = registry.get_engine(engine).name
    family = decode_family(quant)
    backend = backend or backend_for(gpu)
    table = _table(name)
    unit = table.math_unit(family, backend, gpu) if table is not None and table.math_unit else "bf16"
    return Regime(name, family, gpu_class(gpu), backend, unit, eager)


def _table(engine: str) -> EfficiencyTable | None:
    planner = registry.get_engine(engine).planner
    return planner.decode_efficiency if planner is not None else None


def _prefill(engine: str) -> float:
    planner = registry.get_engine(engine).planner
    return planner.prefill_efficiency if planner is not None else 0.5


def prior(name: str) -> tuple[float, float]:
    """(prior value, its scale) of a parameter: the sourced figures servelab had before the corpus."""
    head, _, rest = name.partition(".")
    role, _, key = rest.partition(".")
    if role == "memory" or role == "backend":
        return 1.0, 1.0  # the class / backend at its peak; family and unit terms add to it
    if role == "allreduce":
        return 1.0, 1.0  # the interconnect model's time
    table = _table(head)
    if role == "weights":
        eff = decode_efficiency(table, key, 1).weights if table else 0.8
        return max(0.0, 1 / eff - 1), 1.0
    if role == "kv":
        eff = decode_efficiency(table, KV_FAMILY, 1).kv if table else 0.8
        return 1 / eff, 1 / eff
    if role == "compute":
        return 1 / _prefill(head) - 1, 1.0
    if role == "attention" or role == "decode":
        return 1 / _prefill(head), 1 / _prefill(head)
    if role == "launch":
        return 0.0, LAUNCH_SCALE_S * (4 if key == "eager" else 1)
    if role == "host":
        return 0.0, HOST_SCALE_S
    if role == "token":
        return 0.0, TOKEN_SCALE_S
    raise ValueError(f"unknown step-model parameter {name!r}")


@dataclass(frozen=True)
class StepModel:
    """Parameter values by name (those absent: their prior) and where they came from."""

    values: dict[str, float] = field(default_factory=dict)
    provenance: dict[str, Any] = field(default_factory=dict)
    # "engine|gpu class|figure group|batch range" -> (lo, hi) of measured / predicted over cross-validation's
    # left-out rows (predict/corpus/crossval.py `bands`)
    bands: dict[str, tuple[float, float]] = field(default_factory=dict)

    def band(self, engine: str, gpu_class: str, figure: str, batch: int) -> tuple[float, float] | None:
        """The (lo, hi) factors a predicted `figure` ("TTFT", "TPOT/ITL", "output tok/s", "pp tok/s",
        "tg tok/s") is expected within: its regime's, else the engine's for that figure, else the figure's;
        None when cross-validation left too few rows of it. `engine` in any spelling the registry knows."""
        from servelab.predict.corpus.crossval import batch_range

        engine = registry.registry_name(engine)
        for key in (
            f"{engine}|{gpu_class}|{figure}|{batch_range(batch)}",
            f"{engine}|*|{figure}|*",
            f"*|*|{figure}|*",
        ):
            if key in self.bands:
                return self.bands[key]
        return None

    def value(self, name: str) -> float:
        return self.values[name] if name in self.values else prior(name)[0]

    def rates(self, r: Regime, gpu: GPU, layers: int, *, source: str = "corpus") -> AchievedRates:
        """The `AchievedRates` of one pass's regime on `gpu` (per GPU: the roofline's figures are per rank): the
        decodes' matmuls at `flops_s`, the prompts' at `prefill_flops_s`."""
        n = r.names()
        bw = gpu.bandwidth_bytes_s
        unit = gpu.tensor_flops(r.unit)
        return AchievedRates(
            bandwidth_bytes_s=bw / _positive(self.value(n["weights"]) + self.value(n["memory"])),
            flops_s=unit / _positive(self.value(n["decode"])),
            prefill_flops_s=unit / _positive(self.value(n["compute"]) + self.value(n["backend"])),
            step_overhead_s=self.value(n["host"]),
            token_overhead_s=self.value(n["token"]),
            source=source,
            kv_bandwidth_bytes_s=bw / _positive(self.value(n["kv"])),
            attention_flops_s=gpu.tensor_flops(ATTENTION_UNIT) / _positive(self.value(n["attention"])),
            pass_overhead_s=layers * self.value(n["launch"]),
            allreduce_scale=self.value(n["allreduce"]),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "values": dict(sorted(self.values.items())),
            "bands": {k: list(v) for k, v in sorted(self.bands.items())},
            "provenance": self.provenance,
        }


def _positive(x: float) -> float:
    return max(x, 1e-9)


def prior_model() -> StepModel:
    """Every parameter at its prior: the plan's figures with the step model's structure."""
    return StepModel({}, {"source": "priors"})


def _band_key(key: str) -> str:
    engine, _, rest = key.partition("|")
    return f"{registry.registry_name(engine)}|{rest}"


def load_step_model(path: Path | None = None) -> StepModel | None:
    """The fitted model at `path`, else at $SERVELAB_STEP_MODEL, else the one shipped with servelab; None when
    none has been fitted or $SERVELAB_STEP_MODEL is `none`. A file that cannot be read is one ConfigError."""
    chosen = os.environ.get(STEP_MODEL_ENV, "")
    if path is None and chosen.lower() == "none":
        return None  # the plan's figures alone, even where a fit ships
    if path is None and chosen:
        path = Path(chosen)
    try:
        return _load(path)
    except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
        where = path or FIT_FILE
        raise ConfigError(
            f"step model {where} is unreadable ({exc}); fit it again or unset {STEP_MODEL_ENV}"
        ) from exc


def _load(path: Path | None) -> StepModel | None:
    """The model in `path` (else the shipped file), parsed once per file version: every roofline asks for it, and
    advise builds hundreds."""
    if path is None:
        resource = resources.files("servelab.predict").joinpath(FIT_FILE)
        if not resource.is_file():
            return None
        return _parsed("shipped", (0, 0), resource.read_text)
    stat = path.stat()
    return _parsed(str(path), (stat.st_mtime_ns, stat.st_size), path.read_text)


_PARSED: dict[tuple[str, tuple[int, int]], StepModel] = {}


def _parsed(where: str, version: tuple[int, int], read: Callable[..., str]) -> StepModel:
    key = (where, version)
    if key not in _PARSED:
        _PARSED[key] = _from_text(read(encoding="utf-8"))
    return _PARSED[key]


def _from_text(text: str) -> StepModel:
    doc = json.loads(text)
    bands = {_band_key(k): (float(v[0]), float(v[1])) for k, v in doc.get("bands", {}).items()}
    return StepModel({k: float(v) for k, v in doc["values"].items()}, dict(doc.get("provenance", {})), bands)

"""The validation set of real engine logs (tests/fixtures/real-logs/) as planner runs: a case's settings turned
into `make_plan`'s inputs, the plan, and each of the engine's own figures beside the plan's.

Test-side on purpose: the library never reads test fixtures. Used by tests/unit/test_plan_vs_real.py and
benchmarks/plan_vs_real.py. The case format is tests/fixtures/real-logs/README.md.
"""

from __future__ import annotations

import json
import math
import re
import shlex
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from servelab.engines.vllm import cmdline as vllm_cmdline
from servelab.engines.vllm.cmdline import VllmLaunch
from servelab.errors import ConfigError, ServelabError
from servelab.hardware.gpus import GIB, GPU, MIB, find_gpu, with_overrides
from servelab.model.catalog import catalog_model, find_catalog_id
from servelab.model.hf_config import spec_from_config
from servelab.model.quant import get_quant
from servelab.model.spec import ModelSpec
from servelab.plan.make import make_plan
from servelab.sizing.fit import Speculative
from servelab.sizing.types import Plan

ROOT = Path(__file__).resolve().parent / "fixtures" / "real-logs"
ENGINES = ("vllm", "sglang", "llamacpp")
DEFAULT_TOLERANCE = 0.05
# When the case names no card the catalog has, the planner runs on this stand-in (memory far beyond any
# case) and only the figures that do not depend on the card's memory are compared; no fit verdict.
STAND_IN_VRAM_GIB = 4096.0
STAND_IN_BANDWIDTH_GB_S = 1000.0
# A case's `quantization` in servelab's names where the spelling differs. "none" is the unquantized bf16
# checkpoint (also where the catalog entry is a quantized release, as DeepSeek-V3's fp8). AutoRound's int4
# export is symmetric 4-bit with groups of 128 (GPTQ's layout); W8A8-INT8 stores one byte per weight with a
# scale per output channel, the bytes of fp8-channel.
QUANT_NAMES = {"none": "bf16", "auto_round-int4": "gptq-w4g128", "w8a8-int8": "fp8-channel"}
# The GGUF mix a llama.cpp case is planned in when its excerpt does not name one (weights then not compared).
GGUF_STAND_IN = "Q8_0"
# llama.cpp's devices that are host memory, in its buffer lines.
HOST_DEVICES = ("CPU", "CPU_Mapped", "CUDA_Host", "ROCm_Host")
# Settings servelab's planner takes (each engine's name for it); any other setting of a case is listed as
# not expressed, so a reader of the table sees what the plan could not be told.
EXPRESSED = {
    "vllm": {
        "tensor_parallel",
        "max_model_len",
        "gpu_memory_utilization",
        "kv_cache_dtype",
        "max_num_seqs",
        "max_num_batched_tokens",
        "enable_prefix_caching",
        "language_model_only",
        "limit_mm_per_prompt",
        "speculative",
        "enforce_eager",
        "compilation_config",
        "attention_backend",
    },
    "sglang": {
        "tensor_parallel",
        "context_length",
        "mem_fraction_static",
        "kv_cache_dtype",
        "max_total_tokens",
        "max_running_requests",
        "attention_backend",
    },
    "llamacpp": {
        "ctx_size",
        "n_parallel",
        "n_gpu_layers",
        "cache_type_k",
        "cache_type_v",
        "n_batch",
        "n_ubatch",
        "flash_attn",
        "kv_unified",
    },
}


@dataclass(frozen=True)
class Case:
    name: str  # engine/slug
    data: Mapping[str, Any]
    path: Path

    @property
    def engine(self) -> str:
        return str(self.data["engine"])

    @property
    def settings(self) -> Mapping[str, Any]:
        return self.data["settings"]

    @property
    def plannable(self) -> bool:
        return self.data.get("plannable", True) is not False

    @property
    def gpu_known(self) -> bool:
        return self.data.get("gpu_catalog") is not None

    def tolerance(self, figure: str) -> float:
        return float((self.data.get("tolerance") or {}).get(figure, DEFAULT_TOLERANCE))


def load_cases() -> list[Case]:
    """Every case of the set, engine by engine, in file order."""
    cases = []
    for engine in ENGINES:
        for path in sorted((ROOT / engine).glob("*.yaml")):
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
            cases.append(Case(f"{engine}/{path.stem}", data, path))
    return cases


def plannable_cases() -> list[Case]:
    return [case for case in load_cases() if case.plannable]


def case_model(case: Case) -> ModelSpec:
    """The model a case serves: its attached config.json, else the catalog id it names or shares."""
    config = case.data.get("model_config")
    if config:
        text = (case.path.parent / str(config)).read_text(encoding="utf-8")
        return spec_from_config(json.loads(text), name=str(case.data["model"]), source="hf")
    model_id = find_catalog_id(str(case.data["model"])) or find_catalog_id(
        str(case.data.get("catalog_model") or "-")
    )
    if model_id is None:
        raise ConfigError(f"{case.name}: no model the planner can build")
    return catalog_model(model_id)


def case_gpu(case: Case) -> GPU:
    """The case's card from the hardware catalog, its own total memory winning; a stand-in when unknown."""
    memory = case.data.get("gpu_memory_gib")
    if not case.gpu_known:
        return with_overrides(
            None, vram_gib=memory or STAND_IN_VRAM_GIB, bandwidth_gb_s=STAND_IN_BANDWIDTH_GB_S
        )
    return with_overrides(find_gpu(str(case.data["gpu_catalog"])), vram_gib=memory)


def case_quant(case: Case) -> str | None:
    """servelab's name for the checkpoint's quantization; None for the model's own format (or unknown)."""
    raw = str(case.data["quantization"])
    name = raw.split(":", 1)[1] if raw.startswith("gguf:") else raw
    name = QUANT_NAMES.get(name, name)
    if name is None:
        return None
    try:
        return get_quant(name).name
    except ConfigError:
        return None


def weights_priced(case: Case) -> bool:
    """Whether the plan's weights are the checkpoint's (its quant is known to servelab)."""
    return str(case.data["quantization"]) == "none" or case_quant(case) is not None


def _kv_dtype(value: object) -> str | None:
    return None if value in (None, "auto") else str(value)


# Releases of the cases that print no version line, read off what their notes name. vLLM: the source file line
# numbers of a release (gpu_worker.py:276 is v0.10.1's, gpu_worker.py:298 v0.11.0's), the V0 log format of
# v0.6.4-v0.6.6, the month of the thread (July 2025: v0.9.2/v0.10.0), a PR branch's base (vllm PR 39559: its "before" run prints
# 0.19.1rc1.dev122, and its graph lines sit 38 lines below the v0.19.1 wheel's 5876/5955). sglang: the date of the thread between two
# release wheels (main of 2025-03-25 lies between 0.4.4.post1 of 2025-03-14 and 0.4.4.post4 of 2025-04-05, which
# set the same default; July 2025 is 0.4.9.x). llama.cpp: every case without a build line is dated 2025 or
# earlier (the one late-2025 case offloads every layer, so -ngl's reading does not matter to it), so before b7470
# (2025-12-18), the earliest of the planner's llama.cpp build boundaries (builds.py: -ngl counting the output layer
# from b7470, the f16-only flash-attention mask from b9410, the limited outputs from b9460); the number given is a
# build below that bound (b7440), not the case's build. The rest: the current release.
EARLY_BUILD = "b7440"
VERSION_FROM_NOTES = {
    "vllm/gpt-oss-120b-h100-marlin-refused": "0.10.1",
    "vllm/gpt-oss-120b-h100-util095-mbt1024-refused": "0.11.0",
    "vllm/qwen3-14b-v1-32k-lmcache": "0.11.0",
    "vllm/qwen3-235b-a22b-fp8-4xh100": "0.9.2",
    "vllm/v0-llama31-8b-rtx3090-20k": "0.6.4",
    "vllm/v0-llama31-8b-rtx3090-29k-refused": "0.6.4",
    "vllm/v1-0.7-llama31-70b-w8a8-gpu-blocks": "0.7.0",
    "vllm/v0-0.8-qwen3-30b-a3b-w4a16-rtx3090-seqs8": "0.8.5",
    "vllm/v0-0.6-llama3-8b-tp1-80gb-profile": "0.6.5",
    "vllm/v0-0.6-llama3-8b-tp2-80gb-profile": "0.6.5",
    "vllm/qwen3.5-35b-a3b-gguf-iq2xxs-24gb-v019-pr39559-graphs": "0.19.1",
    "sglang/llama-3.1-8b-fa3-h100": "0.4.4.post1",
    "sglang/qwen3-235b-a22b-fp8-tp4-h100": "0.4.9.post2",
    "llamacpp/deepseek-r1-distill-qwen-7b-f16-kv": EARLY_BUILD,
    "llamacpp/deepseek-v3-8gpu-q4_0k-np8": EARLY_BUILD,
    "llamacpp/deepseek-v3-cpu-mla-fa-32k": EARLY_BUILD,
    "llamacpp/llama-3-70b-2gpu-4060ti-3060-split": EARLY_BUILD,
    "llamacpp/llama-3.1-70b-q4kl-rocm-ngl0-compute-oom": EARLY_BUILD,
    "llamacpp/qwen3-next-80b-q4km-gfx1151-kv": EARLY_BUILD,
}


def engine_version(case: Case) -> str | None:
    """The engine release a case ran: its stated version, else the one its notes imply, else None (the current)."""
    stated = str(case.data["engine_version"])
    if stated.startswith("unknown") or stated.startswith("main"):
        return VERSION_FROM_NOTES.get(case.name)
    return stated


def _mtp(value: Mapping[str, Any] | None) -> Speculative | None:
    """A case's speculative setting when it is the model's own MTP layers (no draft model to build)."""
    if not value or value.get("method") != "mtp":
        return None
    return Speculative("mtp", int(value["num_speculative_tokens"]))


def _text_only(settings: Mapping[str, Any]) -> bool:
    """vLLM --language-model-only, or --limit-mm-per-prompt with every modality at 0 (no encoder profile), as
    the vLLM command-line reader decides it."""
    limits = settings.get("limit_mm_per_prompt")
    launch = VllmLaunch(
        language_model_only=bool(settings.get("language_model_only")),
        limit_mm_per_prompt=dict(limits) if isinstance(limits, Mapping) else None,
    )
    return launch.text_only


def _use_v1(case: Case) -> bool | None:
    """VLLM_USE_V1 as the case's command sets it (`NAME=value` words before `vllm`), read by vLLM's own reader."""
    words = shlex.split(str(case.data.get("command") or ""))
    environment = dict(w.split("=", 1) for w in words if re.match(r"[A-Z_][A-Z0-9_]*=", w))
    return vllm_cmdline.parse([], environment).use_v1


def plan_inputs(case: Case) -> dict[str, Any]:
    """`make_plan`'s keyword arguments for a case (the engine, quant, context, KV dtype, parallel, GPUs, flags)."""
    s = case.settings
    quant = case_quant(case)
    if quant is None and case.engine == "llamacpp" and not weights_priced(case):
        quant = GGUF_STAND_IN  # llama.cpp loads GGUF only; its KV and buffers do not depend on the mix
    if case.engine == "vllm":
        inputs = {
            "context": s.get("max_model_len"),
            "kv_dtype": _kv_dtype(s.get("kv_cache_dtype")),
            "gpus": int(s.get("tensor_parallel") or 1),
            "gpu_memory_utilization": s.get("gpu_memory_utilization"),
            "max_num_seqs": s.get("max_num_seqs"),
            "max_num_batched_tokens": s.get("max_num_batched_tokens"),
            "enable_prefix_caching": s.get("enable_prefix_caching"),
            "language_model_only": _text_only(s) or None,
            "speculative": _mtp(s.get("speculative")),
            "use_v1": _use_v1(case),
            "enforce_eager": s.get("enforce_eager") or None,
            "compilation_config": json.dumps(s["compilation_config"])
            if s.get("compilation_config")
            else None,
            "attention_backend": s.get("attention_backend"),
        }
    elif case.engine == "sglang":
        inputs = {
            "context": s.get("context_length"),
            "kv_dtype": _kv_dtype(s.get("kv_cache_dtype")),
            "parallel": int(s.get("max_running_requests") or 1),
            "gpus": int(s.get("tensor_parallel") or 1),
            "mem_fraction_static": s.get("mem_fraction_static"),
            "max_total_tokens": s.get("max_total_tokens"),
            "attention_backend": s.get("attention_backend"),
        }
    else:
        slots = int(s.get("n_parallel") or 1)
        same = s.get("cache_type_k") == s.get("cache_type_v")
        fa = s.get("flash_attn")
        inputs = {
            "context": int(s["ctx_size"]) // (1 if s.get("kv_unified") else slots)
            if s.get("ctx_size")
            else None,
            "kv_dtype": _kv_dtype(s.get("cache_type_k")),
            "kv_dtype_v": None if same else _kv_dtype(s.get("cache_type_v")),
            "flash_attn": None if fa is None else ("on" if fa else "off"),
            "parallel": slots,
            "gpus": int(case.data["gpu_count"]),  # -sm layer over every device
            "n_gpu_layers": s.get("n_gpu_layers"),
            "n_batch": s.get("n_batch"),
            "n_ubatch": s.get("n_ubatch"),
            "kv_unified": s.get("kv_unified"),
        }
    inputs["engine_version"] = engine_version(case)
    return {"engine": case.engine, "quant": quant, **{k: v for k, v in inputs.items() if v is not None}}


def not_expressed(case: Case) -> list[str]:
    """The case's settings the planner cannot be told (engine defaults, or knobs servelab does not model)."""
    return [k for k, v in case.settings.items() if v is not None and k not in EXPRESSED[case.engine]]


def run_plan(case: Case) -> Plan:
    return make_plan(case_model(case), case_gpu(case), **plan_inputs(case))


@dataclass(frozen=True)
class Comparison:
    case: str
    engine: str
    figure: str
    engine_value: float
    plan_value: float | None  # None: not compared (see `why`)
    tolerance: float
    why: str = ""  # why the figure is not compared

    @property
    def error(self) -> float | None:
        """Relative error of the plan against the engine ((plan - engine) / |engine|); None if not compared."""
        if self.plan_value is None or self.engine_value == 0:
            return None
        return (self.plan_value - self.engine_value) / abs(self.engine_value)

    @property
    def within(self) -> bool:
        return self.error is not None and abs(self.error) <= self.tolerance


# Figures that follow from the card's memory (vLLM's and sglang's pools are what is left of it).
MEMORY_BOUND = {
    "kv_budget_gib",
    "kv_tokens",
    "gpu_blocks",
    "max_concurrency",
    "mamba_cache_blocks",
    "mamba_cache_slots",
    "estimated_max_model_len",
    "max_running_requests",
}


def _detail(name: str, scale: float = 1.0) -> Callable[[Plan], float | None]:
    def read(plan: Plan) -> float | None:
        value = plan.details.get(name)
        return None if not isinstance(value, int | float) else float(value) / scale

    return read


def _memory(name: str, scale: float, gpus: bool = False) -> Callable[[Plan], float | None]:
    def read(plan: Plan) -> float | None:
        value = float(getattr(plan.memory_bytes, name)) / scale
        return value * plan.tensor_parallel if gpus else value

    return read


# The plan's number for each figure the set uses, per engine (units as the case's figure name says).
# llama.cpp's weights and KV over devices: the plan's per-GPU share times the GPUs it splits layers over.
PLAN_FIGURES: dict[str, dict[str, Callable[[Plan], float | None]]] = {
    "vllm": {
        "weights_gib": _memory("weights", GIB),
        "kv_budget_gib": _detail("kv_budget_bytes", GIB),
        "kv_tokens": _detail("kv_tokens"),
        "gpu_blocks": _detail("num_blocks"),
        "max_concurrency": _detail("max_concurrency"),
        "mamba_cache_blocks": _detail("mamba_blocks"),
        "estimated_max_model_len": _detail("estimated_max_model_len"),
        "cuda_graph_estimated_gib": _detail("cuda_graph_bytes", GIB),
    },
    "sglang": {
        "weights_gib": _memory("weights", GIB),
        "kv_budget_gib": _memory("kv_cache", GIB),
        "kv_tokens": _detail("max_total_tokens"),
        "max_running_requests": _detail("max_running_requests"),
        "mamba_cache_slots": _detail("mamba_cache_size"),
    },
    "llamacpp": {
        "weights_mib": _memory("weights", MIB, gpus=True),
        "kv_mib": _memory("kv_cache", MIB, gpus=True),
        "kv_mib_total": _detail("kv_bytes", MIB),
        "weights_mib_total": _detail("model_bytes", MIB),
        "recurrent_mib_total": _detail("recurrent_bytes", MIB),
        "kv_tokens": _detail("n_ctx"),
        "n_ctx_per_seq": _detail("n_ctx_per_slot"),
        "compute_mib": _detail("compute_buffer_bytes", MIB),
        "compute_bytes": _detail("compute_buffer_bytes"),
        "output_mib": _detail("output_buffer_bytes", MIB),
        "recurrent_mib": _memory("recurrent_state", MIB, gpus=True),
    },
}
PER_DEVICE = {"compute_mib", "compute_bytes"}  # each device holds its own buffer: compared device by device


def _engine_values(case: Case, figure: str, value: object) -> Iterator[tuple[str, float, str]]:
    """(label, the engine's number, why not comparable) for one figure; a mapping over devices is summed
    over the GPUs when every GPU is listed, per-device figures are one row per device."""
    if not isinstance(value, dict):
        yield figure, float(value), ""  # type: ignore[arg-type]
        return
    if figure in PER_DEVICE:
        for device, item in value.items():
            yield f"{figure}[{device}]", float(item), ""
        return
    gpus = {d: float(v) for d, v in value.items() if d not in HOST_DEVICES}
    why = "" if len(gpus) == int(case.data["gpu_count"]) else f"excerpt shows {len(gpus)} of the GPUs"
    yield f"{figure}[GPUs]", math.fsum(gpus.values()), why


def _why_not(case: Case, figure: str) -> str:
    left_out = case.data.get("left_out") or {}
    if figure in left_out:  # the case says why the plan cannot be held to this figure (README "left_out")
        return "left out: " + " ".join(str(left_out[figure]).split())
    if figure not in PLAN_FIGURES[case.engine]:
        return "no plan figure"
    if not case.gpu_known and case.engine != "llamacpp" and figure in MEMORY_BOUND:
        return "GPU not known"
    if figure.startswith("weights") and not weights_priced(case):
        return "quant not known"
    if figure == "estimated_max_model_len" and case.data["started"] is not False:
        return "printed only on refusal"
    return ""


def compare(case: Case, plan: Plan) -> list[Comparison]:
    """Each of the case's expected figures beside the plan's (or why it is not compared)."""
    rows = []
    for figure, value in case.data["expected"].items():
        why = _why_not(case, figure)
        for label, number, partial in _engine_values(case, figure, value):
            reason = why or partial or ("negative: the refusal, a fit check" if number < 0 else "")
            planned = None if reason else PLAN_FIGURES[case.engine][figure](plan)
            if planned is None and not reason:
                reason = "the plan has none"
            rows.append(
                Comparison(case.name, case.engine, label, number, planned, case.tolerance(figure), reason)
            )
    rows.extend(_cell_check(case, plan))
    return rows


def _cell_check(case: Case, plan: Plan) -> list[Comparison]:
    """KV tokens the plan's own cell gives at the engine's printed budget: the cell arithmetic alone,
    whatever the budget (so it is compared even when the card is unknown)."""
    expected = case.data["expected"]
    if case.engine == "llamacpp" or "kv_budget_gib" not in expected or "kv_tokens" not in expected:
        return []
    budget = PLAN_FIGURES[case.engine]["kv_budget_gib"](plan)
    tokens = PLAN_FIGURES[case.engine]["kv_tokens"](plan)
    planned = None if not budget or tokens is None else float(expected["kv_budget_gib"]) * tokens / budget
    # a case may leave this check out by its own name (`left_out: {kv_tokens@engine_budget: why}`), e.g. where the
    # release counts its tokens another way than the plan
    label = "kv_tokens@engine_budget"
    why = _why_not(case, label) if label in (case.data.get("left_out") or {}) else ""
    return [
        Comparison(
            case.name,
            case.engine,
            "kv_tokens@engine_budget",
            float(expected["kv_tokens"]),
            None if why else planned,
            case.tolerance("kv_tokens"),
            why or ("" if planned is not None else "the plan has no KV pool"),
        )
    ]


def fit_signal(case: Case) -> bool:
    """Whether a case can check the fit verdict: it says started or refused, on a card the catalog has."""
    return case.data["started"] is not None and case.gpu_known


@dataclass(frozen=True)
class Outcome:
    case: Case
    plan: Plan | None
    comparisons: list[Comparison] = field(default_factory=list)
    error: str = ""  # the planner's one-line refusal of the inputs, if any

    @property
    def fit_agrees(self) -> bool | None:
        """Plan's fits == engine started (None without a fit signal); a planner error counts as not fitting."""
        if not fit_signal(self.case):
            return None
        fits = self.plan.fits if self.plan is not None else False
        return fits == bool(self.case.data["started"])


def outcome(case: Case) -> Outcome:
    try:
        plan = run_plan(case)
    except ServelabError as exc:
        return Outcome(case, None, [], str(exc))
    return Outcome(case, plan, compare(case, plan))
